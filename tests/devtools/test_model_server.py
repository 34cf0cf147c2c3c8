"""The scripted model server, its mock model, the approval webhook and the dev-model command."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys

import httpx
import pytest

from toolnexus_daemon.llm.base import ModelRequest
from toolnexus_daemon.llm.openai import OpenAITransport
from toolnexus_daemon.model import HttpConfig, LlmConfig, ToolDef, ToolSource, Usage
from toolnexus_daemon.tools.base import ToolInvocation
from toolnexus_daemon.tools.webhook import WebhookExecutor
from toolnexus_devtools import (
    Reply,
    ScriptedModelServer,
    approval_request_id,
    chat_response,
    handle_approval,
    mock_model,
    tool_call,
)
from toolnexus_devtools.model_server import parse_listen

TOOLS = [{"type": "function", "function": {"name": "first", "parameters": {}}},
         {"type": "function", "function": {"name": "second", "parameters": {}}}]


def test_mock_model_calls_the_first_tool() -> None:
    """Without tool messages the mock model calls the first listed tool with no arguments."""
    reply = mock_model({"messages": [{"role": "user", "content": "go"}], "tools": TOOLS})
    assert reply["choices"][0]["message"]["tool_calls"] == [tool_call("first", {})]
    assert reply["usage"] == {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}


def test_mock_model_answers_with_the_first_tool_output() -> None:
    """Once a tool message is present the answer is that message's content."""
    messages = [{"role": "user", "content": "go"}, {"role": "tool", "tool_call_id": "c", "content": "42"},
                {"role": "tool", "tool_call_id": "d", "content": "43"}]
    reply = mock_model({"messages": messages, "tools": TOOLS})
    assert reply["choices"][0]["message"] == {"role": "assistant", "content": "42"}
    assert reply["usage"]["total_tokens"] == 3


def test_mock_model_without_tools_says_ok() -> None:
    """With neither tools nor tool messages the answer is "ok"."""
    assert mock_model({"messages": []})["choices"][0]["message"]["content"] == "ok"


def test_approval_asks_then_performs() -> None:
    """No answer asks for approval under a per-action id; an ok answer performs the action; a
    decline makes the re-invoked call (a new attempt) ask the same question again."""
    call = {"call_id": "rt/root/s1c0", "runtime_id": "rt", "handle": "root", "tool": "approval",
            "answer": None}
    pending = handle_approval(call)["pending"]
    assert pending == {"id": approval_request_id("rt/root/s1c0"), "kind": "approval", "prompt": "approve?"}
    retry = {**call, "call_id": "rt/root/s1c0a1"}
    assert handle_approval({**retry, "answer": {"id": pending["id"], "ok": True}}) == {
        "output": "action performed", "is_error": False}
    assert handle_approval({**retry, "answer": {"id": pending["id"], "ok": False}})["pending"] == pending


def test_approval_ids_differ_per_action_and_are_short() -> None:
    """Two actions of one handle get different ids, each 'approval-' and ten hex digits."""
    a, b = approval_request_id("rt/root/s1c0"), approval_request_id("rt/root/s3c0")
    assert a != b
    assert re.fullmatch(r"approval-[0-9a-f]{10}", a)


def test_pushed_replies_come_first_then_the_script(server: ScriptedModelServer) -> None:
    """Queued replies are served FIFO with their status and headers, then the default script."""
    server.push(Reply(503, "busy", {"Retry-After": "3"}), chat_response(content="two"))
    url = server.url + "/chat/completions"
    with httpx.Client() as client:
        first = client.post(url, json={"messages": []})
        second = client.post(url, json={"messages": []})
        third = client.post(url, json={"messages": [], "n": 3})
    assert (first.status_code, first.text, first.headers["retry-after"]) == (503, "busy", "3")
    assert second.json()["choices"][0]["message"]["content"] == "two"
    assert third.json()["choices"][0]["message"]["content"] == "ok"
    assert server.calls == 3
    assert server.requests[2] == {"messages": [], "n": 3}


def test_a_custom_script_sees_each_body() -> None:
    """A script callable receives the request body and its dict is the 200 reply."""
    with ScriptedModelServer(script=lambda body: chat_response(content=str(len(body["messages"])))) as srv:
        reply = httpx.post(srv.url + "/chat/completions", json={"messages": [{}, {}]})
    assert reply.json()["choices"][0]["message"]["content"] == "2"


def test_a_crashing_script_is_a_500() -> None:
    """A script that raises answers 500 with the exception, so the test sees it."""
    with ScriptedModelServer(script=lambda body: 1 / 0) as srv:  # type: ignore[arg-type,return-value]
        reply = httpx.post(srv.url + "/chat/completions", json={})
    assert reply.status_code == 500
    assert "ZeroDivisionError" in reply.text


def test_unknown_paths_and_bad_bodies(server: ScriptedModelServer) -> None:
    """Unrouted paths are 404 and a non-JSON model body is 400, neither counted as a model call."""
    assert httpx.get(server.origin + "/nope").status_code == 404
    assert httpx.post(server.url + "/chat/completions", content=b"{{").status_code == 400
    assert server.calls == 0
    assert [r.path for r in server.received] == ["/nope", "/v1/chat/completions"]


async def test_mock_model_and_approval_webhook_together(server: ScriptedModelServer) -> None:
    """The real transport gets a call to the approval tool, and the real webhook suspends on it."""
    tool = ToolDef(name="approval", source=ToolSource.WEBHOOK, http=HttpConfig(url=server.approval_url))
    body = {"model": "m", "messages": [{"role": "user", "content": "do it"}],
            "tools": [{"type": "function", "function": {"name": "approval", "parameters": {}}}]}
    model = OpenAITransport(LlmConfig(base_url=server.url, model="m"), env={})
    reply = await model.complete(ModelRequest("rt", "root", "m1", body))
    await model.aclose()
    assert reply.usage == Usage(3, 2, 5)
    call = reply.message["tool_calls"][0]
    assert call["function"]["name"] == "approval"
    tools = WebhookExecutor(env={})
    args = json.loads(call["function"]["arguments"])
    result = await tools.invoke(ToolInvocation("rt", "root", "rt/root/s1c0", tool, args))
    await tools.aclose()
    assert result.pending is not None
    assert result.pending.id == approval_request_id("rt/root/s1c0")


@pytest.mark.parametrize(("listen", "parsed"), [
    ("127.0.0.1:8099", ("127.0.0.1", 8099)), (":0", ("127.0.0.1", 0)), ("[::1]:9", ("::1", 9)),
    ("8099", ("127.0.0.1", 8099)),
])
def test_parse_listen(listen: str, parsed: tuple[str, int]) -> None:
    """host:port, [v6]:port, :port and a bare port are accepted."""
    assert parse_listen(listen) == parsed


def test_parse_listen_rejects_garbage() -> None:
    """A listen address without a numeric port is refused clearly."""
    with pytest.raises(ValueError, match="host:port"):
        parse_listen("localhost:http")


def test_dev_model_command_serves_until_sigterm() -> None:
    """``toolnexus-daemon dev-model`` finds the dev tools beside the daemon, prints its URLs,
    serves the mock model and exits 0 on SIGTERM."""
    command = [sys.executable, "-m", "toolnexus_daemon", "dev-model", "--listen", "127.0.0.1:0"]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        match = re.search(r"base_url (\S+) ; approval webhook (\S+)", line)
        assert match, line
        reply = httpx.post(match.group(1) + "/chat/completions", json={"messages": []})
        assert reply.json()["choices"][0]["message"]["content"] == "ok"
        assert httpx.post(match.group(2), json={"runtime_id": "r", "handle": "h"}).json()["pending"]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_dev_model_command_without_devtools_says_how_to_get_them() -> None:
    """A runtime without the dev tools (``make run`` ships only the daemon) exits 2 with a hint,
    not a traceback: the CLI imports them only when ``dev-model`` is asked for."""
    entry = ("import sys; sys.modules['toolnexus_devtools'] = None; "  # None in sys.modules: not importable
             "from toolnexus_daemon.cli import main; "
             "sys.exit(main(['dev-model', '--listen', '127.0.0.1:0']))")
    done = subprocess.run([sys.executable, "-c", entry], capture_output=True, text=True, timeout=30)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert "toolnexus_devtools" in done.stderr and "make dev-model" in done.stderr
    assert done.stdout == ""
