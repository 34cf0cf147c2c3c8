"""Streamed model calls of both HTTP styles against real event streams on loopback."""

from __future__ import annotations

import json

import pytest

from toolnexus_daemon.llm.anthropic import AnthropicTransport
from toolnexus_daemon.llm.base import ModelError, ModelReply, ModelRequest, ModelTransport
from toolnexus_daemon.llm.openai import OpenAITransport
from toolnexus_daemon.model import JSON, LlmConfig, Usage
from toolnexus_devtools import (
    Reply,
    ScriptedModelServer,
    Stream,
    anthropic_response,
    chat_response,
    chat_stream,
    messages_stream,
    tool_call,
    tool_use,
)

from .conftest import RecordingSleep

BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "temperature": 0}
STYLES = ["openai", "anthropic"]


def transport(style: str, server: ScriptedModelServer, sleep: RecordingSleep, stream: bool = True,
              **config: object) -> ModelTransport:
    cls = OpenAITransport if style == "openai" else AnthropicTransport
    llm = LlmConfig(base_url=server.url, model="m", stream=stream, **config)  # type: ignore[arg-type]
    return cls(llm, env={}, backoff_base=30.0, sleep=sleep, rand=lambda: 1.0)


async def complete(t: ModelTransport, deltas: list[str]) -> ModelReply:
    try:
        return await t.complete(ModelRequest("rt", "root", "c1", BODY, on_text=deltas.append))
    finally:
        await t.aclose()


def answer(style: str, text: str | None, tools: bool = False) -> JSON:
    """The same answer in each style's non-streamed form."""
    if style == "openai":
        calls = [tool_call("a", {"x": 1}, "id_a"), tool_call("b", {"y": [2, 3]}, "id_b")] if tools else None
        return chat_response(text, calls, usage=(5, 7, 12))
    uses = [tool_use("a", {"x": 1}, "id_a"), tool_use("b", {"y": [2, 3]}, "id_b")] if tools else None
    return anthropic_response(text, uses, usage=(5, 7))


def as_stream(style: str, body: JSON, **kw: object) -> Stream:
    return (chat_stream if style == "openai" else messages_stream)(body, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("style", STYLES)
async def test_streamed_text_equals_the_unstreamed_reply(style: str, server: ScriptedModelServer,
                                                         sleep: RecordingSleep) -> None:
    """Deltas arrive in order, and the assembled message and usage equal the non-streamed call's."""
    server.push(answer(style, "The quick brown fox."), answer(style, "The quick brown fox."))
    deltas: list[str] = []
    streamed = await complete(transport(style, server, sleep), deltas)
    plain = await complete(transport(style, server, sleep, stream=False), [])
    assert deltas == ["The ", "quick ", "brown ", "fox."]
    assert streamed == plain
    assert streamed.usage == Usage(5, 7, 12)
    assert server.received[0].json()["stream"] is True
    assert "stream" not in server.requests[1]


@pytest.mark.parametrize("style", STYLES)
async def test_tool_calls_are_assembled(style: str, server: ScriptedModelServer,
                                        sleep: RecordingSleep) -> None:
    """Interleaved pieces of two tool calls are assembled by index; the message equals the unstreamed one."""
    server.push(answer(style, "Calling.", tools=True), answer(style, "Calling.", tools=True))
    deltas: list[str] = []
    streamed = await complete(transport(style, server, sleep), deltas)
    plain = await complete(transport(style, server, sleep, stream=False), [])
    assert streamed == plain
    calls = streamed.message["tool_calls"]
    assert [(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls] == [
        ("id_a", "a", {"x": 1}), ("id_b", "b", {"y": [2, 3]})]
    assert deltas == ["Calling."]


async def test_openai_stream_request_asks_for_usage(server: ScriptedModelServer,
                                                    sleep: RecordingSleep) -> None:
    """The body gains stream and stream_options.include_usage; other keys pass through untouched."""
    await complete(transport("openai", server, sleep), [])
    assert server.requests == [{**BODY, "stream": True, "stream_options": {"include_usage": True}}]


async def test_openai_chunks_without_usage_or_done(server: ScriptedModelServer,
                                                   sleep: RecordingSleep) -> None:
    """A server that sends no usage chunk and no [DONE] still ends normally after a finish_reason."""
    chunk = {"choices": [{"index": 0, "delta": {"content": "hey"}, "finish_reason": None}]}
    end = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    server.push(Stream([chunk, ": keep-alive", end]))
    reply = await complete(transport("openai", server, sleep), [])
    assert (reply.message, reply.usage) == ({"role": "assistant", "content": "hey"}, Usage(0, 0, 0))


@pytest.mark.parametrize("style", STYLES)
async def test_a_cut_before_any_text_is_retried(style: str, server: ScriptedModelServer,
                                                sleep: RecordingSleep) -> None:
    """A stream broken before text went out is retried like any transient failure."""
    head = as_stream(style, answer(style, "")).events[:1]
    server.push(Stream(head, cut=True), answer(style, "fine"))
    deltas: list[str] = []
    reply = await complete(transport(style, server, sleep), deltas)
    assert (reply.message["content"], deltas, server.calls) == ("fine", ["fine"], 2)


@pytest.mark.parametrize(("style", "cut"), [(s, c) for s in STYLES for c in (True, False)])
async def test_a_stream_ending_after_text_fails_without_retry(style: str, cut: bool,
                                                              server: ScriptedModelServer,
                                                              sleep: RecordingSleep) -> None:
    """Once text was streamed, a broken or truncated stream is a final error (no half message)."""
    events = as_stream(style, answer(style, "one two three")).events
    # up to the second text delta: openai [role, one, two]; anthropic [start, ping, block, one, two]
    server.push(Stream(events[:3 if style == "openai" else 5], cut=cut), answer(style, "never"))
    deltas: list[str] = []
    with pytest.raises(ModelError, match=r"^model call failed: stream .*after text was streamed"):
        await complete(transport(style, server, sleep, retries=3), deltas)
    assert (server.calls, sleep.delays) == (1, [])
    assert deltas == ["one ", "two "]


@pytest.mark.parametrize(("style", "error"), [
    ("openai", {"error": {"message": "overloaded"}}),
    ("anthropic", ("error", {"type": "error",
                             "error": {"type": "overloaded_error", "message": "Overloaded"}})),
])
async def test_an_error_event_before_text_is_retried(style: str, error: object, server: ScriptedModelServer,
                                                     sleep: RecordingSleep) -> None:
    """A provider error inside the stream, before any text, is retried."""
    server.push(Stream([error]), answer(style, "ok"))  # type: ignore[list-item]
    reply = await complete(transport(style, server, sleep), [])
    assert (reply.message["content"], server.calls) == ("ok", 2)


@pytest.mark.parametrize("style", STYLES)
async def test_error_status_on_a_stream_request(style: str, server: ScriptedModelServer,
                                                sleep: RecordingSleep) -> None:
    """A 429 with Retry-After is retried; a 400 fails at once with its body."""
    server.push(Reply(429, "slow", {"Retry-After": "0"}), Reply(400, "bad request"))
    with pytest.raises(ModelError, match=r"^model call failed after 2 attempts: HTTP 400: bad request$"):
        await complete(transport(style, server, sleep), [])
    assert sleep.delays == [0.0]


@pytest.mark.parametrize("style", STYLES)
async def test_a_json_answer_to_a_stream_request(style: str, server: ScriptedModelServer,
                                                 sleep: RecordingSleep) -> None:
    """A server that ignores stream and answers JSON is read as such; its text is one delta."""
    server.push(Reply(200, answer(style, "all at once")))
    deltas: list[str] = []
    reply = await complete(transport(style, server, sleep), deltas)
    assert (reply.message["content"], deltas) == ("all at once", ["all at once"])


@pytest.mark.parametrize("style", STYLES)
async def test_a_stalled_stream_times_out(style: str, server: ScriptedModelServer,
                                          sleep: RecordingSleep) -> None:
    """Silence longer than timeout_ms between events fails the call; before text it is retryable."""
    server.push(as_stream(style, answer(style, ""), delay_between=1.0), answer(style, "second"))
    reply = await complete(transport(style, server, sleep, timeout_ms=100), [])
    assert (reply.message["content"], server.calls) == ("second", 2)


@pytest.mark.parametrize("style", STYLES)
async def test_a_long_stream_outlives_timeout_ms(style: str, server: ScriptedModelServer,
                                                 sleep: RecordingSleep) -> None:
    """timeout_ms bounds each silence, not the whole stream, so a long answer is not cut off."""
    # 7 (openai) or 9 (anthropic) events 80 ms apart: the whole stream (0.56 s or more) takes well
    # over the 300 ms, while each silence leaves 220 ms of slack for a loaded machine
    server.push(as_stream(style, answer(style, "a b c"), delay_between=0.08))
    reply = await complete(transport(style, server, sleep, timeout_ms=300, retries=0), [])
    assert reply.message["content"] == "a b c"


async def test_a_failing_listener_does_not_fail_the_call(server: ScriptedModelServer,
                                                         sleep: RecordingSleep) -> None:
    """on_text raising is logged and ignored; the reply still comes back whole."""
    def boom(delta: str) -> None:
        raise RuntimeError("watcher bug")

    server.push(answer("openai", "still fine"))
    t = transport("openai", server, sleep)
    reply = await t.complete(ModelRequest("rt", "root", "c1", BODY, on_text=boom))
    await t.aclose()
    assert reply.message["content"] == "still fine"


async def test_a_malformed_chunk_is_a_failure_not_a_crash(server: ScriptedModelServer,
                                                          sleep: RecordingSleep) -> None:
    """A chunk whose fields have the wrong shape fails the call cleanly (and is retried before text)."""
    server.push(Stream([{"choices": [{"index": 0, "delta": "not an object"}]}]), answer("openai", "ok"))
    reply = await complete(transport("openai", server, sleep), [])
    assert (reply.message["content"], server.calls) == ("ok", 2)
