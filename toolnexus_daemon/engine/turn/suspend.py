"""Durable suspension: a tool asked for an out-of-band answer (docs/protocol.md §4 Suspension).

The handle goes ``suspended`` with its step checkpoint kept; nothing of the
turn joins the transcript. The request-id index records the *leaf* that
suspended, which is where ``Resume`` routes an answer. A parent whose ``task``
call returned a child's pending suspends the same way on the same request,
but is not indexed: the cascade reaches it through its child.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from ...model import EventType, HandleState, Request, Status
from ..expiry.ttl import with_ttl
from ..state import answer_links, notes
from ..state.change import Change
from ..state.checkpoint import Step
from ..state.handle import Handle
from ..state.request_index import RequestEntry
from . import drift

if TYPE_CHECKING:
    from .context import Suspending

TASK_TOOL = "task"


async def suspend_durably(rt: Suspending, h: Handle, step: Step, idx: int, change: Change) -> None:
    """Park ``h`` on the request of call ``idx`` and tell its waiters ``pending``."""
    call_result = step.results[idx]
    request = call_result.pending
    assert request is not None
    step.pending_idx = idx
    is_leaf = step.calls[idx].name != TASK_TOOL or not rt.agent_of(h).team
    entry: RequestEntry | None = None
    if is_leaf:
        asked = with_ttl(_with_path(h, request), rt.options.pending_ttl_ms, rt.deps.clock.now())
        await rt.requests.fetch(asked.id)  # the entry open reads, read off the event loop
        request, entry = rt.requests.open(asked, h.id)
        tool = step.calls[idx].name
        if rt.deps.answer_base and answer_links.asks_for_link(rt.agent_of(h), rt.options, tool):
            request = _linked(rt, h, request, entry, change)
    drift.record(rt, h, step.calls[idx].name if is_leaf else "")
    h.state = HandleState.SUSPENDED
    h.pending = request
    h.suspended_at = rt.deps.clock.now()
    result = h.result(Status.PENDING, request.prompt, pending=request)
    h.last_result = result
    change.save(h).checkpoint(h, h.cp)
    if entry is not None:
        change.requests[request.id] = entry
    note = notes.suspended_durable(h.id, request.kind)
    change.transition(h, HandleState.RUNNING, HandleState.SUSPENDED, note)
    change.event(h, EventType.PENDING, note, pending=request)
    change.event(h, EventType.RESULT, note, result=result)
    await rt.commit(change)
    h.live.settle(result)


def _linked(rt: Suspending, h: Handle, request: Request, entry: RequestEntry, change: Change) -> Request:
    """``request`` with a fresh answer link; its digest joins the entry and gets its row."""
    minted = answer_links.mint(rt.deps.answer_base)
    entry.links.append(minted.digest)
    change.links[minted.digest] = answer_links.LinkRow(rt.id, request.id, h.id).to_json()
    return replace(request, answer_url=minted.url)


def _with_path(h: Handle, request: Request) -> Request:
    """``data.path``: the leaf's id as segments, root first, so ``"/".join(path)`` is its id."""
    data = dict(request.data or {})
    data["path"] = h.id.split("/")
    return Request(request.id, request.kind, request.prompt, request.url, data, request.expires_at)


