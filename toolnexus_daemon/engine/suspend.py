"""Durable suspension: a tool asked for an out-of-band answer (DESIGN §4 Suspension).

The handle goes ``suspended`` with its step checkpoint kept; nothing of the
turn joins the transcript. The request-id index records the *leaf* that
suspended, which is where ``Resume`` routes an answer. A parent whose ``task``
call returned a child's pending suspends the same way on the same request,
but is not indexed: the cascade reaches it through its child.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..model import EventType, HandleState, Request, Status
from . import notes
from .change import Change
from .checkpoint import Step
from .handle import Handle

if TYPE_CHECKING:
    from .runtime import Runtime

TASK_TOOL = "task"


def index_entry(request: Request, handle: str) -> dict[str, object]:
    """The request-index record of a fresh suspension: pending on ``handle``."""
    return {"request": request.to_json(), "handles": {handle: {"state": "pending"}}}


async def suspend_durably(rt: Runtime, h: Handle, step: Step, idx: int, change: Change) -> None:
    """Park ``h`` on the request of call ``idx`` and tell its waiters ``pending``."""
    call_result = step.results[idx]
    request = call_result.pending
    assert request is not None
    step.pending_idx = idx
    is_leaf = step.calls[idx].name != TASK_TOOL or not rt.agent_of(h).team
    request = _with_path(rt, h, request) if is_leaf else request
    h.state = HandleState.SUSPENDED
    h.pending = request
    h.suspended_at = rt.deps.clock.now()
    result = h.result(Status.PENDING, request.prompt, pending=request)
    h.last_result = result
    change.save(h).checkpoint(h, h.cp)
    if is_leaf:
        change.requests[request.id] = _merged_entry(rt, request, h.id)
    note = notes.suspended_durable(h.id, request.kind)
    change.transition(h, "running", "suspended", note)
    change.event(h, EventType.PENDING, note, pending=request)
    change.event(h, EventType.RESULT, note, result=result)
    await rt.commit(change)
    h.settle_waiters(result)


def _with_path(rt: Runtime, h: Handle, request: Request) -> Request:
    """``data.path``: the id path of the leaf that suspended, root first."""
    path = [a.id for a in reversed(rt.ancestors(h))] + [h.id]
    data = dict(request.data or {})
    data["path"] = path
    return Request(request.id, request.kind, request.prompt, request.url, data, request.expires_at)


def _merged_entry(rt: Runtime, request: Request, handle: str) -> dict[str, object]:
    """Add ``handle`` to an existing index entry of the same id (answered entries are replaced)."""
    existing = rt.deps.store.get_request(rt.id, request.id)
    if not existing:
        return index_entry(request, handle)
    handles = {k: v for k, v in dict(existing.get("handles") or {}).items() if v.get("state") == "pending"}
    handles[handle] = {"state": "pending"}
    return {"request": request.to_json(), "handles": handles}
