"""Model styles and tool sources through the daemon: anthropic, streaming, plain http tools.

The model is the scripted HTTP server on 127.0.0.1 (both ``/v1/chat/completions`` and
``/v1/messages`` run the reference mock model); the approval tool is its demo webhook.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.daemon import DaemonProcess
from toolnexus_client import Event, Runtime, Tool, agent, registry
from toolnexus_devtools import (
    Reply,
    ScriptedModelServer,
    Stream,
    chat_response,
    chat_stream,
    tool_call,
)

SECRET_ENV = "TNX_TEST_API_SECRET"
SECRET = "sk-planted-do-not-log-4242"


@pytest.fixture
def keyed_daemon(tmp_path: Path) -> Iterator[DaemonProcess]:
    proc = DaemonProcess(tmp_path / "data", "--allow-env", SECRET_ENV, env={SECRET_ENV: SECRET}).start()
    try:
        yield proc
    finally:
        proc.stop()


def _approval_registry(server: ScriptedModelServer) -> list[Any]:
    return registry(agent("approver", does="asks first",
                          uses={"tools": [Tool.webhook("approve", server.approval_url)]}))


def _cycle(daemon: DaemonProcess, server: ScriptedModelServer, llm: dict[str, Any],
           watch_text: bool = False) -> tuple[tuple[str, str, int], list[str]]:
    """Suspend on the approval tool, resume ok; returns (status, text, usage) and the streamed deltas."""
    rt = Runtime.new(target=daemon.target, registry=_approval_registry(server), llm=llm)
    deltas: list[str] = []
    try:
        h = rt.spawn(rt.root, "approver")
        # the result event too: it comes after every delta of its turn, so the reader stops there
        stream = rt.watch(types=["text", "result"], handle=h) if watch_text else None
        reader = threading.Thread(target=_collect, args=(stream, deltas)) if stream else None
        if reader:
            reader.start()
        rt.wake(h, "please")
        pending = rt.wait(h, timeout=30)
        assert pending.status == "pending" and pending.pending is not None
        out = rt.resume({"id": pending.pending.id, "ok": True})
        if stream and reader:
            reader.join(10)  # it ends at the final result, every delta before it delivered
            stream.cancel()
        assert out.result is not None
        return (out.result.status, out.result.text, rt.snapshot(h).usage_total), deltas
    finally:
        rt.detach()


def _collect(stream: Any, into: list[str]) -> None:
    """The text deltas, in order, until the handle's first ``done`` result."""
    for ev in stream:
        assert isinstance(ev, Event)
        if ev.type == "result":
            if ev.result is not None and ev.result.status == "done":
                return
            continue
        into.append(str((ev.data or {}).get("delta", "")))


def test_anthropic_style_matches_openai(daemon: DaemonProcess, model_server: ScriptedModelServer) -> None:
    openai, _ = _cycle(daemon, model_server, {"style": "openai", "base_url": model_server.url, "model": "m"})
    anthropic, _ = _cycle(daemon, model_server, {"style": "anthropic", "base_url": model_server.origin,
                                                 "model": "claude-test"})
    assert openai == anthropic == ("done", "action performed", 8)
    sent = [r for r in model_server.received if r.path == "/v1/messages"]
    assert len(sent) == 2 and sent[0].headers["anthropic-version"] == "2023-06-01"
    body = sent[1].json()
    assert body["max_tokens"] == 4096 and body["tools"][0]["name"] == "approve"
    assert body["messages"][-1]["content"][0]["type"] == "tool_result"


@pytest.mark.parametrize("style", ["openai", "anthropic"])
def test_streaming_publishes_deltas_and_ends_like_the_plain_run(daemon: DaemonProcess,
                                                                model_server: ScriptedModelServer,
                                                                style: str) -> None:
    base = model_server.url if style == "openai" else model_server.origin
    plain, _ = _cycle(daemon, model_server, {"style": style, "base_url": base, "model": "m"})
    streamed, deltas = _cycle(daemon, model_server, {"style": style, "base_url": base, "model": "m",
                                                     "stream": True}, watch_text=True)
    assert streamed == plain == ("done", "action performed", 8)
    assert "".join(deltas) == "action performed" and len(deltas) >= 2, "deltas arrive in order"


def test_a_stream_cut_midway_is_retried_and_never_leaves_half_a_message(
        daemon: DaemonProcess, model_server: ScriptedModelServer) -> None:
    first = chat_response(tool_calls=[tool_call("approve", {})], usage=(3, 2, 5))
    model_server.push(Stream(chat_stream(first).events[:2], cut=True), Reply(200, first))
    status, _ = _cycle(daemon, model_server, {"style": "openai", "base_url": model_server.url, "model": "m",
                                              "stream": True, "retries": 2})
    assert status == ("done", "action performed", 8)
    bodies = model_server.requests
    assistant = [m for m in bodies[-1]["messages"] if m["role"] == "assistant"]
    assert len(assistant) == 1, "the cut stream left no partial assistant message behind"


def test_an_http_tool_fills_the_url_sends_query_and_expands_headers(
        keyed_daemon: DaemonProcess, model_server: ScriptedModelServer) -> None:
    seen: list[Any] = []

    def items(req: Any) -> Any:
        seen.append(req)
        if req.path.endswith("/missing"):
            return Reply(404, "no such item")
        return {"item": req.path.rsplit("/", 1)[-1], "q": req.query.get("q", [""])[0]}

    model_server.route("/api/items", items)
    calls = iter([
        chat_response(tool_calls=[tool_call("get_item", {"id": "42", "q": "blue", "extra": 1}, "c1"),
                                  tool_call("get_item", {"id": "missing", "q": "x"}, "c2")]),
        chat_response(content="done"),
    ])
    model_server.push(next(calls), next(calls))
    tool = Tool.http("get_item", model_server.origin + "/api/items/{id}", query=["q"],
                     headers={"Authorization": "Bearer ${" + SECRET_ENV + "}"})
    reg = registry(agent("reader", uses={"tools": [tool]}))
    rt = Runtime.new(target=keyed_daemon.target, registry=reg,
                     llm={"style": "openai", "base_url": model_server.url, "model": "m"})
    try:
        h = rt.spawn(rt.root, "reader")
        rt.wake(h, "fetch")
        assert rt.wait(h, timeout=30).text == "done"
    finally:
        rt.detach()
    # the step's two calls run concurrently: they may reach the server in either order
    assert sorted(r.path for r in seen) == ["/api/items/42", "/api/items/missing"]
    first = next(r for r in seen if r.path == "/api/items/42")
    assert first.headers["authorization"] == f"Bearer {SECRET}" and first.query["q"] == ["blue"]
    tool_messages = [m["content"] for m in model_server.requests[-1]["messages"] if m["role"] == "tool"]
    assert tool_messages[0] == '{"item": "42", "q": "blue"}'
    assert tool_messages[1] == "HTTP 404: no such item"
    assert SECRET not in keyed_daemon.logs()
