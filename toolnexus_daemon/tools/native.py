"""Executor for ``native`` tools: the call is relayed to a worker of the app over ``Connect``.

The worker hub picks a connected worker that serves the tool, re-sends the
call (same ``call_id``) if that worker disconnects — for an ``on_crash: "ask"`` tool
it does not: the outcome is unknown and the engine asks (§11) — and gives up when no
worker takes it within the runtime's tool timeout; that becomes an error
result naming the tool, which the model reads (docs/protocol.md §6), never a crash.
"""

from __future__ import annotations

from ..model import OnCrash, ToolResult
from ..relay import NoWorker, ToolCallOut, ToolOutcomeIn, WorkerHub, WorkerLost
from .base import OutcomeUnknown, ToolInvocation


class NativeExecutor:
    """``ToolExecutor`` for source ``native``."""

    def __init__(self, hub: WorkerHub) -> None:
        self._hub = hub

    async def invoke(self, inv: ToolInvocation) -> ToolResult:
        """Send the call to a worker and return its ToolOutcome as a ToolResult."""
        name = inv.tool.name
        out = ToolCallOut(inv.call_id, inv.handle, name, inv.arguments, inv.answer, inv.version, inv.latest,
                          inv.traceparent)
        try:
            reply = await self._hub.call(inv.runtime_id, out, inv.take_timeout_ms / 1000,
                                         resend=inv.tool.on_crash is not OnCrash.ASK)
        except WorkerLost:
            raise OutcomeUnknown(f'the worker serving "{name}" disconnected before replying') from None
        except NoWorker:
            return ToolResult(is_error=True, output=(
                f'no worker is connected to serve native tool "{name}" '
                f"(waited {inv.take_timeout_ms} ms); connect a worker with Connect"))
        if not isinstance(reply, ToolOutcomeIn):
            # a reply of another kind carries no outcome: an empty, successful result, as before
            # the relay was typed (a hostile worker gains nothing by sending it)
            return ToolResult(output="")
        return reply.result

    async def aclose(self) -> None:
        """Nothing to release: the hub outlives the executor."""
