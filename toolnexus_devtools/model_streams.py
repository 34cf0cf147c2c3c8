"""Scripted server-sent event streams and the Anthropic-style mock model.

The scripted server answers a model call with a ``Stream`` the way a
provider does with ``"stream": true``: ``text/event-stream``, one event at a
time, optionally with a pause between events or a connection cut after the
last one. ``chat_stream`` and ``messages_stream`` turn an ordinary
(non-streamed) response body into the stream a provider would send for it,
so a test can script one answer and run it both ways; the server does that
by itself when a request asks for a stream and the script answered plain
JSON. ``mock_anthropic_model`` is ``mock_model``'s twin for ``/v1/messages``,
with the same texts and token totals, so both styles tell the same story.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from typing import Any

from toolnexus_daemon.model import JSON

# an event: raw data text ("[DONE]"), a JSON data object, or (event name, data); text
# starting with ":" is written as a comment line (what servers send as a keep-alive)
StreamEvent = str | JSON | tuple[str, "str | JSON"]


@dataclass(frozen=True)
class Stream:
    """One scripted ``text/event-stream`` response."""

    events: list[StreamEvent] = field(default_factory=list)
    # seconds between events, to let a test watch deltas arrive one by one
    delay_between: float = 0.0
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    # break the connection after the events: the client sees a transfer cut mid-way
    cut: bool = False
    # seconds to wait before the response head, to exercise client timeouts
    delay: float = 0.0


def encode_event(event: StreamEvent) -> bytes:
    """One event in the wire format, ending with its blank line."""
    if isinstance(event, str) and event.startswith(":"):
        return f"{event}\n\n".encode()
    name, data = event if isinstance(event, tuple) else (None, event)
    text = data if isinstance(data, str) else json.dumps(data)
    lines = ([f"event: {name}"] if name else []) + [f"data: {line}" for line in text.split("\n")]
    return ("\n".join(lines) + "\n\n").encode()


def words(text: str) -> list[str]:
    """``text`` in word-sized deltas whose concatenation is ``text`` again."""
    return re.findall(r"\S+\s*|\s+", text)


def _halves(text: str) -> list[str]:
    middle = len(text) // 2
    return [text[:middle], text[middle:]]


def chat_stream(response: JSON, *, delay_between: float = 0.0) -> Stream:
    """A ``chat.completion`` body as the chunk stream OpenAI would send for it.

    Content goes word by word; each tool call's head (id, name, first half of
    the arguments) comes before any call's tail, so assembling by index is
    exercised; usage comes in a last chunk with no choices, then ``[DONE]``.
    """
    choice = response["choices"][0]
    message = choice.get("message") or {}
    base = {"id": response.get("id", "chatcmpl-scripted"), "object": "chat.completion.chunk",
            "created": response.get("created", int(time.time())), "model": response.get("model", "scripted")}

    def chunk(delta: JSON, finish: str | None = None) -> JSON:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    events: list[StreamEvent] = [chunk({"role": "assistant", "content": ""})]
    content = message.get("content")
    events += [chunk({"content": piece}) for piece in words(content if isinstance(content, str) else "")]
    calls = message.get("tool_calls") or []
    for i, call in enumerate(calls):
        fn = call["function"]
        events.append(chunk({"tool_calls": [{"index": i, "id": call["id"], "type": "function", "function": {
            "name": fn["name"], "arguments": _halves(fn["arguments"])[0]}}]}))
    for i, call in enumerate(calls):
        events.append(chunk({"tool_calls": [{"index": i, "function": {
            "arguments": _halves(call["function"]["arguments"])[1]}}]}))
    events.append(chunk({}, choice.get("finish_reason") or "stop"))
    if response.get("usage") is not None:
        events.append({**base, "choices": [], "usage": response["usage"]})
    return Stream(events + ["[DONE]"], delay_between=delay_between)


def tool_use(name: str, input: JSON, id: str = "toolu_1") -> JSON:
    """One Anthropic ``tool_use`` content block."""
    return {"type": "tool_use", "id": id, "name": name, "input": input}


def anthropic_response(content: str | None = None, tool_uses: list[JSON] | None = None,
                       usage: tuple[int, int] = (0, 0), model: str = "scripted") -> JSON:
    """A Messages API response body: a text block (if any) then the tool_use blocks."""
    blocks: list[JSON] = ([{"type": "text", "text": content}] if content else []) + list(tool_uses or [])
    return {"id": "msg_scripted", "type": "message", "role": "assistant", "model": model, "content": blocks,
            "stop_reason": "tool_use" if tool_uses else "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": usage[0], "output_tokens": usage[1]}}


def messages_stream(response: JSON, *, delay_between: float = 0.0) -> Stream:
    """A Messages API body as the event stream Anthropic would send for it."""
    usage = response.get("usage") or {}
    head = {k: v for k, v in response.items() if k not in ("content", "usage")}
    start = {**head, "content": [], "stop_reason": None, "stop_sequence": None,
             "usage": {"input_tokens": usage.get("input_tokens", 0), "output_tokens": 1}}
    events: list[StreamEvent] = [("message_start", {"type": "message_start", "message": start}),
                                 ("ping", {"type": "ping"})]
    for index, block in enumerate(response.get("content") or []):
        events += _block_events(index, block)
    events.append(("message_delta", {"type": "message_delta", "delta": {
        "stop_reason": response.get("stop_reason") or "end_turn", "stop_sequence": None},
        "usage": {"output_tokens": usage.get("output_tokens", 0)}}))
    events.append(("message_stop", {"type": "message_stop"}))
    return Stream(events, delay_between=delay_between)


def _block_events(index: int, block: JSON) -> list[StreamEvent]:
    """start, deltas (text word by word, tool input in two JSON pieces), stop."""
    kind = block.get("type")
    if kind == "text":
        opening: JSON = {"type": "text", "text": ""}
        deltas = [{"type": "text_delta", "text": piece} for piece in words(str(block.get("text") or ""))]
    elif kind == "tool_use":
        opening = {**block, "input": {}}
        deltas = [{"type": "input_json_delta", "partial_json": piece}
                  for piece in _halves(json.dumps(block.get("input") or {}))]
    else:
        opening, deltas = block, []
    events: list[StreamEvent] = [("content_block_start", {"type": "content_block_start", "index": index,
                                                          "content_block": opening})]
    events += [("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d})
               for d in deltas]
    return events + [("content_block_stop", {"type": "content_block_stop", "index": index})]


def mock_anthropic_model(body: JSON) -> JSON:
    """``mock_model`` for ``/v1/messages``: call the first tool once, then answer with its output."""
    for message in body.get("messages") or []:
        result = _first_tool_result(message)
        if result is not None:
            return anthropic_response(content=result, usage=(2, 1))
    tools = body.get("tools") or []
    if tools:
        return anthropic_response(tool_uses=[tool_use(str(tools[0].get("name", "")), {})], usage=(3, 2))
    return anthropic_response(content="ok", usage=(2, 1))


def _first_tool_result(message: Any) -> str | None:
    content = message.get("content") if isinstance(message, dict) else None
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict) and block.get("type") == "tool_result":
            value = block.get("content")
            if isinstance(value, list):
                return "".join(str(p.get("text", "")) for p in value if isinstance(p, dict))
            return "" if value is None else str(value)
    return None
