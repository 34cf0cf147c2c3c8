"""Durable suspension: a tool asked for an out-of-band answer (DESIGN §4 Suspension).

The handle goes ``suspended`` with its step checkpoint kept; nothing of the
turn joins the transcript. The request-id index records the *leaf* that
suspended, which is where ``Resume`` routes an answer. A parent whose ``task``
call returned a child's pending suspends the same way on the same request,
but is not indexed: the cascade reaches it through its child.
"""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING

from ..model import JSON, EventType, HandleState, Request, Status
from . import notes
from .change import Change
from .checkpoint import Step
from .handle import Handle, storable_id

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
    entry: dict[str, object] | None = None
    if is_leaf:
        request, entry = _indexed(rt, _with_path(h, request), h.id)
    h.state = HandleState.SUSPENDED
    h.pending = request
    h.suspended_at = rt.deps.clock.now()
    result = h.result(Status.PENDING, request.prompt, pending=request)
    h.last_result = result
    change.save(h).checkpoint(h, h.cp)
    if entry is not None:
        change.requests[request.id] = entry
    note = notes.suspended_durable(h.id, request.kind)
    change.transition(h, "running", "suspended", note)
    change.event(h, EventType.PENDING, note, pending=request)
    change.event(h, EventType.RESULT, note, result=result)
    await rt.commit(change)
    h.settle_waiters(result)


def _with_path(h: Handle, request: Request) -> Request:
    """``data.path``: the leaf's id as segments, root first, so ``"/".join(path)`` is its id."""
    data = dict(request.data or {})
    data["path"] = h.id.split("/")
    return _renamed(request, request.id, data)


def _renamed(request: Request, request_id: str, data: JSON | None) -> Request:
    return Request(request_id, request.kind, request.prompt, request.url, data, request.expires_at)


def _indexed(rt: Runtime, request: Request, handle: str) -> tuple[Request, dict[str, object]]:
    """The request as announced and its index entry.

    A request id is single-use within a runtime: an id whose entry was answered, expired or
    cancelled on any handle gets a daemon-made unique id, so replaying the old answer stays a
    harmless duplicate and can never approve this later action. An id still pending elsewhere
    (the same question asked by several handles at once) is shared."""
    existing = rt.deps.store.get_request(rt.id, request.id)
    if not existing:
        return request, index_entry(request, handle)
    handles = dict(existing.get("handles") or {})
    if any(st.get("state") != "pending" for st in handles.values()):
        fresh = _renamed(request, unique_request_id(request.id), request.data)
        return fresh, index_entry(fresh, handle)
    handles[handle] = {"state": "pending"}
    return request, {"request": request.to_json(), "handles": handles}


def unique_request_id(used: str) -> str:
    """``<used>~<12 hex>``, the used id shortened if needed so the result stays storable."""
    suffix = "~" + secrets.token_hex(6)
    base = used
    while not storable_id(base + suffix):
        base = base[:-1]
    return base + suffix
