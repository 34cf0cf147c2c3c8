"""Executor for ``native`` tools: the call is relayed to a worker of the app over ``Connect``.

The worker hub picks a connected worker that serves the tool, re-sends the
call (same ``call_id``) if that worker disconnects, and gives up when no
worker takes it within the runtime's tool timeout; that becomes an error
result naming the tool, which the model reads (docs/protocol.md §6), never a crash.
"""

from __future__ import annotations

from ..model import ToolResult
from ..workers import CallKind, NoWorker, Outgoing, WorkerHub
from .base import ToolInvocation


class NativeExecutor:
    """``ToolExecutor`` for source ``native``."""

    def __init__(self, hub: WorkerHub) -> None:
        self._hub = hub

    async def invoke(self, inv: ToolInvocation) -> ToolResult:
        """Send the call to a worker and return its ToolOutcome as a ToolResult."""
        name = inv.tool.name
        payload = {"tool": name, "arguments": inv.arguments,
                   "answer": inv.answer.to_json() if inv.answer is not None else None}
        out = Outgoing(CallKind.TOOL, inv.call_id, inv.handle, payload)
        try:
            reply = await self._hub.call(inv.runtime_id, out, inv.take_timeout_ms / 1000)
        except NoWorker:
            return ToolResult(is_error=True, output=(
                f'no worker is connected to serve native tool "{name}" '
                f"(waited {inv.take_timeout_ms} ms); connect a worker with Connect"))
        return ToolResult.from_json(reply)

    async def aclose(self) -> None:
        """Nothing to release: the hub outlives the executor."""
