"""Escalation to an interpreter: a suspension answered inline by the nearest ``wait_for`` holder.

The handle itself, then its ancestors, then the runtime (``RuntimeOptions.wait_for``) may hold
interpreter authority; when one does and a resolver worker is connected, the suspension is
answered on the spot (traces ``running→suspended (pending …)``, ``escalate → …``,
``suspended→running (Answer ok=…)``). With no resolver — or none that answers — the
suspension stays durable as usual, so nothing hangs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from ...model import ROOT_ID, Answer, EventType, HandleState, Request, ToolResult
from ..expiry.rule import EXPIRED, expired
from ..state import notes
from ..state.change import Change
from ..state.handle import Handle

if TYPE_CHECKING:
    from .context import Escalating

Reinvoke = Callable[[Answer], Awaitable[ToolResult]]


def authority(rt: Escalating, h: Handle) -> str | None:
    """Who answers for ``h``: ``self``, the nearest ancestor with ``wait_for``, ``runtime``, or None."""
    if rt.agent_of(h).wait_for:
        return "self"
    for a in rt.table.ancestors(h):
        agent = rt.registry_of(a).agents.get(a.agent)
        if a.id != ROOT_ID and agent is not None and agent.wait_for:
            return a.id
    return "runtime" if rt.options.wait_for else None


async def try_inline(rt: Escalating, h: Handle, call_id: str, request: Request,
                     reinvoke: Reinvoke) -> ToolResult | None:
    """The call's resolved result, or None when the suspension must stay durable."""
    who = authority(rt, h)
    resolver = rt.deps.resolver
    if who is None or resolver is None or not resolver.available(rt.id):
        return None
    async with h.live.escalation():
        await _flip(rt, h, request, who)
        answer = await resolver.resolve(rt.id, h.id, call_id + "/resolve", request,
                                        rt.options.tool_timeout_ms)
        await _back(rt, h, answer)
    if answer is None:
        return None
    if expired(request, rt.deps.clock.now()):
        answer = Answer(answer.id, ok=False, reason=EXPIRED)
    if not answer.ok:
        return ToolResult(output=f"declined/expired: {request.prompt}")
    again = await reinvoke(answer)
    return ToolResult(output=f"unresolved: {request.prompt}") if again.pending is not None else again


async def _flip(rt: Escalating, h: Handle, request: Request, who: str) -> None:
    assert h.cp is not None
    h.state, h.pending, h.escalating = HandleState.SUSPENDED, request, True
    change = Change().save(h).checkpoint(h, h.cp)
    change.transition(h, HandleState.RUNNING, HandleState.SUSPENDED,
                      notes.pending_inline(h.id, request.kind, request.prompt))
    change.event(h, EventType.ESCALATE, notes.escalate(h.id, who), pending=request, data={"to": who})
    await rt.commit(change)


async def _back(rt: Escalating, h: Handle, answer: Answer | None) -> None:
    assert h.cp is not None
    h.state, h.pending, h.escalating = HandleState.RUNNING, None, False
    change = Change().save(h).checkpoint(h, h.cp)
    if answer is None:
        change.transition(h, HandleState.SUSPENDED, HandleState.RUNNING,
                          f"{h.id}: suspended→running (no interpreter answered; the suspension goes durable)")
    else:
        change.transition(h, HandleState.SUSPENDED, HandleState.RUNNING,
                          notes.suspended_running(h.id, answer.ok))
        change.event(h, EventType.RESUMED, notes.suspended_running(h.id, answer.ok),
                     data={"request_id": answer.id, "ok": answer.ok, "inline": True})
    await rt.commit(change)

