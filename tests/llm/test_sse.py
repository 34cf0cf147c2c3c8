"""The event-stream parser and the two styles' stream assemblers, without a server."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from toolnexus_daemon.llm.anthropic_stream import AnthropicStream
from toolnexus_daemon.llm.openai import OpenAIStream
from toolnexus_daemon.llm.retry import Failure
from toolnexus_daemon.llm.sse import SseEvent, SseParser, StreamError, consume, iter_events
from toolnexus_daemon.model import JSON


async def lines(*items: str) -> AsyncIterator[str]:
    for item in items:
        yield item


async def events(*items: str) -> list[SseEvent]:
    return [e async for e in iter_events(lines(*items))]


async def test_fields_comments_and_multiline_data() -> None:
    """event names, joined data lines, comments, ids and one optional space are handled per spec."""
    parsed = await events(": hello", "event: a", "id: 7", "data: one", "data:two", "", "",
                          "data:  spaced", "retry: 5", "", "event: empty", "")
    assert parsed == [SseEvent("a", "one\ntwo"), SseEvent("message", " spaced")]


async def test_a_last_event_without_its_blank_line_is_delivered() -> None:
    """A stream closed right after a data line still yields that event."""
    assert await events("data: [DONE]") == [SseEvent("message", "[DONE]")]


def test_a_field_without_a_colon_is_a_name_with_no_value() -> None:
    """``data`` alone is an empty data line; an unknown field is ignored."""
    parser = SseParser()
    assert [parser.feed(x) for x in ("data", "bogus", "")] == [None, None, SseEvent("message", "")]


def openai_event(delta: JSON, finish: str | None = None, index: int = 0) -> SseEvent:
    return SseEvent("message", json.dumps(
        {"choices": [{"index": index, "delta": delta, "finish_reason": finish}]}))


def test_openai_tool_calls_without_index_and_repeated_names() -> None:
    """Pieces without an index follow the last call until a new id opens the next; a repeated name stays."""
    stream = OpenAIStream()
    stream.feed(openai_event({"tool_calls": [{"id": "a", "function": {"name": "f", "arguments": "{"}}]}))
    stream.feed(openai_event({"tool_calls": [{"function": {"name": "f", "arguments": "}"}}]}))
    stream.feed(openai_event({"tool_calls": [{"id": "b", "function": {"name": "g", "arguments": "[]"}}]}))
    stream.feed(openai_event({"content": "x"}, index=1))  # a second choice is ignored
    calls = stream.body()["choices"][0]["message"]["tool_calls"]
    assert [(c["id"], c["function"]["name"], c["function"]["arguments"]) for c in calls] == [
        ("a", "f", "{}"), ("b", "g", "[]")]
    assert stream.body()["choices"][0]["message"]["content"] == ""  # never null beside tool calls


def test_openai_garbage_data_is_a_stream_error() -> None:
    """Data that is not JSON (other than [DONE]) fails the stream."""
    with pytest.raises(StreamError, match="not JSON"):
        OpenAIStream().feed(SseEvent("message", "nope"))


def anthropic(kind: str, **data: object) -> SseEvent:
    return SseEvent(kind, json.dumps({"type": kind, **data}))


def test_anthropic_thinking_signature_and_citations_are_kept() -> None:
    """Thinking text, its signature and citations are assembled into verbatim blocks; only text is emitted."""
    stream = AnthropicStream()
    emitted = [stream.feed(e) for e in [
        anthropic("message_start", message={"id": "m1", "model": "x", "content": [], "stop_reason": None,
                                            "usage": {"input_tokens": 9, "output_tokens": 1}}),
        anthropic("content_block_start", index=0, content_block={"type": "thinking", "thinking": ""}),
        anthropic("content_block_delta", index=0, delta={"type": "thinking_delta", "thinking": "let me"}),
        anthropic("content_block_delta", index=0, delta={"type": "signature_delta", "signature": "c2ln"}),
        anthropic("content_block_stop", index=0),
        anthropic("content_block_start", index=1, content_block={"type": "text", "text": ""}),
        anthropic("content_block_delta", index=1, delta={"type": "citations_delta", "citation": {"n": 1}}),
        anthropic("content_block_delta", index=1, delta={"type": "text_delta", "text": "hi"}),
        anthropic("content_block_stop", index=1),
        anthropic("message_delta", delta={"stop_reason": "end_turn"}, usage={"output_tokens": 4}),
        anthropic("message_stop")]]
    assert [e for e in emitted if e] == ["hi"]
    assert stream.done
    assert stream.body() == {
        "type": "message", "role": "assistant", "id": "m1", "model": "x", "stop_reason": "end_turn",
        "usage": {"input_tokens": 9, "output_tokens": 4},
        "content": [{"type": "thinking", "thinking": "let me", "signature": "c2ln"},
                    {"type": "text", "text": "hi", "citations": [{"n": 1}]}]}


def test_anthropic_tool_input_that_is_not_json_is_empty() -> None:
    """Unparseable or absent input pieces leave an empty input, even without content_block_stop."""
    stream = AnthropicStream()
    stream.feed(anthropic("content_block_start", index=0,
                          content_block={"type": "tool_use", "id": "t", "name": "n", "input": {}}))
    stream.feed(anthropic("content_block_delta", index=0,
                          delta={"type": "input_json_delta", "partial_json": "{x"}))
    assert stream.body()["content"] == [{"type": "tool_use", "id": "t", "name": "n", "input": {}}]
    assert not stream.complete


def test_anthropic_block_event_without_index_is_a_stream_error() -> None:
    """A content event without an index cannot be placed and fails the stream."""
    with pytest.raises(StreamError, match="without an index"):
        AnthropicStream().feed(anthropic("content_block_stop"))


async def test_consume_reports_a_truncated_stream() -> None:
    """A stream that ends early is a retryable failure when nothing was emitted, else a final one."""
    text = openai_event({"content": "partial"}).data
    quiet = await consume(lines(f"data: {text}", ""), OpenAIStream(), None)
    loud = await consume(lines(f"data: {text}", ""), OpenAIStream(), lambda d: None)
    assert quiet == Failure("stream ended before its final event", retryable=True)
    assert isinstance(loud, Failure) and not loud.retryable
