"""Server-sent events: parsing the wire format and reading a model's stream to its end.

Both HTTP styles stream the same way (WHATWG HTML §9.2 event streams), so
the parser and the reading loop live here once; what differs per style is
the *assembler* that folds events back into the body the provider would
have sent without streaming, which the style's ordinary parser then reads.
Text deltas go to the request's ``on_text`` as they arrive. Once one has
gone out, the call can no longer be retried: a watcher would see the text
twice, so a stream that breaks after that point is a final failure, and only
the assembled message (never half of one) reaches the transcript.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Protocol

import httpx

from ..model import JSON
from .base import ModelReply
from .retry import Failure, Reader, describe, parse_json_reply, parse_reply, status_failure

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SseEvent:
    """One dispatched event: its ``event:`` name ("message" when absent) and joined ``data:``."""

    event: str
    data: str


class StreamError(Exception):
    """The stream itself reported an error or sent something that is not an event of its kind."""


class SseParser:
    """Turns lines (without their line endings) into events; one instance per stream."""

    def __init__(self) -> None:
        self._event = ""
        self._data: list[str] = []

    def feed(self, line: str) -> SseEvent | None:
        """Take one line; a blank line dispatches the event gathered so far."""
        if not line:
            return self.flush()
        if line.startswith(":"):
            return None  # a comment, used by servers as a keep-alive
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
        return None  # id and retry only matter to reconnecting browsers

    def flush(self) -> SseEvent | None:
        """The pending event, if it has data; the buffers are reset either way."""
        event = SseEvent(self._event or "message", "\n".join(self._data)) if self._data else None
        self._event, self._data = "", []
        return event


async def iter_events(lines: AsyncIterator[str]) -> AsyncIterator[SseEvent]:
    """Every event of a stream of lines; a last event without its blank line is still delivered."""
    parser = SseParser()
    async for line in lines:
        event = parser.feed(line)
        if event is not None:
            yield event
    last = parser.flush()
    if last is not None:
        yield last


def event_json(event: SseEvent) -> JSON:
    """An event's data as a JSON object, or StreamError."""
    try:
        data = json.loads(event.data)
    except RecursionError:
        raise StreamError("event data is JSON nested too deeply to read") from None
    except ValueError as exc:
        raise StreamError(f"event data is not JSON: {event.data[:200]}") from exc
    if not isinstance(data, dict):
        raise StreamError(f"event data is not a JSON object: {event.data[:200]}")
    return data


class Assembler(Protocol):
    """Folds one style's events into the body its non-streamed reply would have had."""

    @property
    def done(self) -> bool:
        """The final event arrived; stop reading."""

    @property
    def complete(self) -> bool:
        """Enough arrived that the end of the stream is a normal end, not a cut."""

    def feed(self, event: SseEvent) -> str:
        """Take one event; returns its text delta ('' if none); raises StreamError."""

    def body(self) -> JSON:
        """The assembled non-streamed reply body."""


def stream_reader(assembler: Callable[[], Assembler], parse: Callable[[JSON], ModelReply],
                  on_text: Callable[[str], None] | None) -> Reader:
    """The reader of a streamed reply; a server that answers with plain JSON is read as such."""
    async def read(response: httpx.Response) -> ModelReply | Failure:
        if not response.is_success:
            await response.aread()
            return status_failure(response)
        if not response.headers.get("content-type", "").startswith("text/event-stream"):
            await response.aread()
            return _whole_reply(parse_json_reply(response, parse), on_text)
        body = await consume(response.aiter_lines(), assembler(), on_text)
        return body if isinstance(body, Failure) else parse_reply(body, parse)
    return read


async def consume(lines: AsyncIterator[str], assembler: Assembler,
                  on_text: Callable[[str], None] | None) -> JSON | Failure:
    """Read events to the end, emitting text deltas; a cut stream is retryable until text went out."""
    emitted = False
    try:
        async for event in iter_events(lines):
            delta = assembler.feed(event)
            if delta and on_text is not None:
                emitted = True
                _emit(on_text, delta)
            if assembler.done:
                return assembler.body()
    except StreamError as exc:
        return _cut(f"stream error: {exc}", emitted, exc)
    except (AttributeError, TypeError, ValueError) as exc:
        # an event of the right kind with fields of the wrong shape: the provider's fault, not a crash
        return _cut(f"malformed stream event: {type(exc).__name__}: {exc}", emitted, exc)
    except httpx.TimeoutException as exc:
        return _cut(f"stream stalled ({type(exc).__name__})", emitted, exc)
    except httpx.HTTPError as exc:
        return _cut(f"stream broken: {describe(exc)}", emitted, exc)
    if assembler.complete:
        return assembler.body()
    return _cut("stream ended before its final event", emitted, None)


def _cut(reason: str, emitted: bool, cause: BaseException | None) -> Failure:
    if emitted:
        reason += " (after text was streamed, so not retried)"
    return Failure(reason, retryable=not emitted, cause=cause)


def _emit(on_text: Callable[[str], None], delta: str) -> None:
    """Hand a delta to the listener; a failing listener must not fail the model call."""
    try:
        on_text(delta)
    except Exception:
        log.exception("on_text listener failed; the delta is dropped")


def _whole_reply(outcome: ModelReply | Failure,
                 on_text: Callable[[str], None] | None) -> ModelReply | Failure:
    """A non-streamed reply to a streamed request: its text goes out as one delta."""
    if isinstance(outcome, ModelReply) and on_text is not None:
        content = outcome.message.get("content")
        if isinstance(content, str) and content:
            _emit(on_text, content)
    return outcome
