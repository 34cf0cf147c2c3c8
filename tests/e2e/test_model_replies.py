"""What the daemon sends back to OpenAI-compatible servers, and usage they do not report.

Real servers (llama-cpp-python) refuse an assistant message with ``"content": null`` and the legacy
``function_call`` beside ``tool_calls``; a stream that ignores ``include_usage`` must not count 0.
The model here is the scripted HTTP server on 127.0.0.1; ``make test-interop`` runs the same flow
against a real llama-cpp-python server.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.daemon import DaemonProcess
from toolnexus_client import Runtime, Tool, agent, registry
from toolnexus_daemon.model import JSON
from toolnexus_devtools import Reply, ScriptedModelServer, chat_stream, tool_call


def legacy_reply(body: JSON) -> JSON:
    """A server that answers tool calls the old way (content null, function_call beside tool_calls)
    and reports no usage at all."""
    tools = [m for m in body.get("messages") or [] if m.get("role") == "tool"]
    if tools:
        message: JSON = {"role": "assistant", "content": f"tool said {tools[0]['content']}"}
    else:
        call = tool_call("lookup", {"q": "x"})
        message = {"role": "assistant", "content": None, "tool_calls": [call],
                   "function_call": call["function"]}
    return {"id": "c", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}


def _run(daemon: DaemonProcess, server: ScriptedModelServer, stream: bool) -> tuple[Runtime, str]:
    tool = Tool("lookup", "looks up", {"type": "object", "properties": {"q": {"type": "string"}}},
                execute=lambda args, ctx: "found")
    reg = registry(agent("reader", does="reads", uses={"tools": [tool]}))
    rt = Runtime.new(target=daemon.target, registry=reg,
                     llm={"style": "openai", "base_url": server.url, "model": "m", "stream": stream})
    handle = rt.spawn(rt.root, "reader")
    rt.wake(handle, "look it up")
    return rt, handle


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_the_assistant_message_goes_back_as_servers_accept_it(daemon: DaemonProcess, stream: bool) -> None:
    script = (lambda body: chat_stream(legacy_reply(body))) if stream else legacy_reply
    with ScriptedModelServer(script) as server:  # type: ignore[arg-type]
        rt, handle = _run(daemon, server, stream)
        try:
            result = rt.wait(handle, timeout=30)
            assert (result.status, result.text) == ("done", "tool said found"), result
            assistant = [m for m in server.requests[1]["messages"] if m["role"] == "assistant"][0]
            assert assistant["content"] == "" and "function_call" not in assistant
            assert assistant["tool_calls"][0]["function"]["name"] == "lookup"
        finally:
            rt.shutdown()


def test_usage_a_stream_does_not_report_is_estimated_and_marked(daemon: DaemonProcess) -> None:
    with ScriptedModelServer(lambda body: chat_stream(legacy_reply(body))) as server:  # type: ignore[arg-type]
        rt, handle = _run(daemon, server, stream=True)
        try:
            result = rt.wait(handle, timeout=30)
            snap = rt.snapshot(handle)
            assert result.total_tokens > 0 and result.usage_estimated
            assert snap.usage_total == result.total_tokens and snap.usage_estimated
            stream = rt.watch(types=["model_call"])
            calls: list[Any] = [next(iter(stream)), next(iter(stream))]
            stream.cancel()
            assert all(e.data["usage"]["estimated"] for e in calls), calls
        finally:
            rt.shutdown()


def test_a_failed_model_call_is_logged_with_its_reason(daemon: DaemonProcess) -> None:
    refusal = Reply(status=500, body={"error": {"message": "Input should be a valid string"}})
    with ScriptedModelServer(lambda body: refusal) as server:  # type: ignore[arg-type,return-value]
        reg = registry(agent("talker", does="talks"))
        rt = Runtime.new(target=daemon.target, registry=reg,
                         llm={"style": "openai", "base_url": server.url, "model": "m", "retries": 0})
        try:
            handle = rt.spawn(rt.root, "talker")
            rt.wake(handle, "hi")
            assert rt.wait(handle, timeout=30).status == "error"
            assert daemon.has_logged('"model call failed"')
            line = next(json.loads(x) for x in daemon.log_lines if '"model call failed"' in x)
            assert line["level"] in ("warning", "WARNING") and "valid string" in line["error"], line
        finally:
            rt.shutdown()


def test_a_token_budget_binds_on_estimated_usage(daemon: DaemonProcess) -> None:
    """A stream that never reports usage still spends the budget: the estimate counts."""
    with ScriptedModelServer(lambda body: chat_stream(legacy_reply(body))) as server:  # type: ignore[arg-type]
        tool = Tool("lookup", "looks up", {"type": "object", "properties": {"q": {"type": "string"}}},
                    execute=lambda args, ctx: "found")
        reg = registry(agent("reader", does="reads", uses={"tools": [tool]}))
        rt = Runtime.new(target=daemon.target, registry=reg,
                         llm={"style": "openai", "base_url": server.url, "model": "m", "stream": True})
        try:
            handle = rt.spawn(rt.root, "reader", budget={"max_tokens": 5})
            rt.wake(handle, "look it up")
            result = rt.wait(handle, timeout=30)
            assert result.limit == "maxTokens" and result.usage_estimated, result
            assert result.total_tokens > 5 and server.calls == 1
        finally:
            rt.shutdown()
