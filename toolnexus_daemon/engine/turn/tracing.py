"""The spans the engine emits, through a protocol that knows nothing of OpenTelemetry.

The engine names what happens — a turn of a handle, a model call, a tool call — and
``observe.tracing`` turns it into OpenTelemetry spans in the GenAI conventions when an OTLP
endpoint is configured. Trace context travels as W3C ``traceparent`` strings: that is what is
stored in a checkpoint (so the turn that resumes after a suspension, a restart or a move to
another daemon is a span of the same trace) and what transports put on outgoing requests.

Off by default: ``NOOP`` makes no objects beyond one shared span and stores no context, so a
daemon without tracing pays a few attribute lookups per call.
"""

from __future__ import annotations

import contextvars
from collections.abc import Mapping, Sequence
from typing import Protocol

# what a span attribute may hold (the OpenTelemetry attribute types the engine uses)
AttrValue = str | int | float | bool | Sequence[str]
Attrs = Mapping[str, AttrValue]

# the W3C traceparent of the caller a verb (New, Spawn, Wake, Resume) was called under, or "";
# set by the API layer for the call's task, and by a ``task`` tool call for the child it wakes
caller: contextvars.ContextVar[str] = contextvars.ContextVar("toolnexus_caller_trace", default="")


class Span(Protocol):
    """One span being recorded; ``traceparent`` is "" when nothing is recorded."""

    @property
    def traceparent(self) -> str: ...
    def set(self, attrs: Attrs) -> None: ...
    def event(self, name: str, attrs: Attrs) -> None: ...
    def end(self, error: str = "") -> None:
        """End the span; ``error`` (a short reason) marks it failed."""


class Tracer(Protocol):
    @property
    def enabled(self) -> bool: ...
    @property
    def capture_content(self) -> bool:
        """Whether prompts, completions and tool arguments and results may go into spans."""
    def start(self, name: str, kind: str, attrs: Attrs, *, parent: str = "", link: str = "") -> Span:
        """Start a span under the ``parent`` traceparent (a new trace when ""), linked to the
        ``link`` traceparent when given. ``kind``: "internal" or "client"."""
    def shutdown(self) -> None:
        """Flush what is buffered and stop exporting."""


class _NoopSpan:
    traceparent = ""

    def set(self, attrs: Attrs) -> None:
        pass

    def event(self, name: str, attrs: Attrs) -> None:
        pass

    def end(self, error: str = "") -> None:
        pass


NOOP_SPAN: Span = _NoopSpan()


class _NoopTracer:
    enabled = False
    capture_content = False

    def start(self, name: str, kind: str, attrs: Attrs, *, parent: str = "", link: str = "") -> Span:
        return NOOP_SPAN

    def shutdown(self) -> None:
        pass


NOOP: Tracer = _NoopTracer()

# the span of the turn the current task runs (set by ``loop.run_turn`` in its own task)
current_turn: contextvars.ContextVar[Span] = contextvars.ContextVar("toolnexus_turn_span", default=NOOP_SPAN)
