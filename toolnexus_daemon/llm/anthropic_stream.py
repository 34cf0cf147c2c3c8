"""Folding an Anthropic Messages event stream back into the message it streamed.

Kept apart from the transport so the event rules can be read (and tested)
on their own. The result is exactly the body a non-streamed call returns,
content blocks included, so one parser (``reply_from_anthropic``) reads both
and a streamed run checkpoints the same message as an unstreamed one.
"""

from __future__ import annotations

import json
from typing import Any

from ..model import JSON
from .sse import SseEvent, StreamError, event_json

# delta type -> the field that carries its text, in the delta and in the block alike
_TEXT_FIELDS = {"text_delta": "text", "thinking_delta": "thinking", "signature_delta": "signature"}


class AnthropicStream:
    """Assembles ``message_start`` … ``message_stop`` into a ``message`` body."""

    def __init__(self) -> None:
        self._message: JSON = {"type": "message", "role": "assistant"}
        self._usage: JSON = {}
        self._blocks: dict[int, JSON] = {}
        self._partial: dict[int, list[str]] = {}
        self._done = False

    @property
    def done(self) -> bool:
        return self._done

    @property
    def complete(self) -> bool:
        # a stop_reason means the model finished even if message_stop itself got lost
        return self._done or self._message.get("stop_reason") is not None

    def feed(self, event: SseEvent) -> str:
        """Take one event; returns the text it adds ('' for every other kind)."""
        data = event_json(event)
        kind = data.get("type") or event.event
        if kind == "message_start":
            self._start(data.get("message") or {})
        elif kind == "content_block_start":
            self._blocks[_index(data)] = dict(data.get("content_block") or {})
        elif kind == "content_block_delta":
            return self._delta(_index(data), data.get("delta") or {})
        elif kind == "content_block_stop":
            self._stop(_index(data))
        elif kind == "message_delta":
            self._message.update(data.get("delta") or {})
            self._usage.update(data.get("usage") or {})  # cumulative counts: the latest wins
        elif kind == "message_stop":
            self._done = True
        elif kind == "error":
            raise StreamError(str(data.get("error") or data)[:500])
        return ""  # ping and event kinds added later are ignored, as the API asks

    def _start(self, message: JSON) -> None:
        self._message.update({k: v for k, v in message.items() if k not in ("content", "usage")})
        self._usage.update(message.get("usage") or {})

    def _delta(self, index: int, delta: JSON) -> str:
        block = self._blocks.setdefault(index, {"type": "text", "text": ""})
        kind = delta.get("type")
        if kind == "input_json_delta":
            self._partial.setdefault(index, []).append(str(delta.get("partial_json") or ""))
        elif kind == "citations_delta":
            block.setdefault("citations", []).append(delta.get("citation"))
        elif kind in _TEXT_FIELDS:
            field = _TEXT_FIELDS[kind]
            piece = str(delta.get(field) or "")
            block[field] = str(block.get(field) or "") + piece
            return piece if kind == "text_delta" else ""
        return ""

    def _stop(self, index: int) -> None:
        """A tool_use block's input is only valid JSON once all its pieces are in."""
        pieces = self._partial.pop(index, None)
        if pieces is not None and index in self._blocks:
            self._blocks[index]["input"] = _input("".join(pieces))

    def body(self) -> JSON:
        for index in list(self._partial):
            self._stop(index)  # a block whose stop was not sent still gets its input
        content = [self._blocks[i] for i in sorted(self._blocks)]
        return {**self._message, "content": content, "usage": dict(self._usage)}


def _index(data: JSON) -> int:
    index = data.get("index")
    if not isinstance(index, int):
        raise StreamError(f"content block event without an index: {str(data)[:200]}")
    return index


def _input(text: str) -> Any:
    """The tool input from its JSON pieces; none at all is ``{}``, as the API's own reply has."""
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}
