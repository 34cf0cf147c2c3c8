"""The caller's trace context: a W3C ``traceparent`` in the metadata of New, Spawn, Wake and Resume.

The turns such a call starts (or continues) are children of the caller's span
(``engine.tracing.caller``). A malformed value is ignored, as the W3C spec asks of a
receiver: tracing is never a reason to refuse a call.
"""

from __future__ import annotations

import re
from typing import TypeVar

from grpc import aio

from ..engine.turn import tracing

TRACEPARENT = "traceparent"
Req = TypeVar("Req")  # any RPC's context: only its metadata is read
Resp = TypeVar("Resp")
# version 00: trace id and span id in lower-case hex, neither all zeros (checked below), flags
_FORM = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$")


def valid(value: str) -> bool:
    m = _FORM.match(value)
    if m is None:
        return False
    trace: str = m.group(1)
    span: str = m.group(2)
    return set(trace) != {"0"} and set(span) != {"0"}


def adopt(context: aio.ServicerContext[Req, Resp]) -> None:
    """Make the call's ``traceparent`` (if any, and well formed) the parent of the turns it starts;
    the context variable is the call's own (each RPC runs in its own task)."""
    for key, value in context.invocation_metadata() or ():
        if key == TRACEPARENT and isinstance(value, str):
            tracing.caller.set(value.strip() if valid(value.strip()) else "")
            return
