"""Ending turns from outside: Interrupt, Close and runtime Shutdown (docs/protocol.md §3).

An interrupted turn is abandoned whole: its open messages are dropped, its
drained inbox items go back to the inbox, and its checkpoint is deleted, so
nothing half-done leaks into the transcript. A suspended handle's pending
request is cancelled along the whole chain that waits on it (the leaf and
the ancestors suspended on the same request), so no parent is left waiting on
an answer that can no longer come.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...errors import FailedPrecondition
from ...model import ROOT_ID, EventType, HandleState, Status
from ..state import notes
from ..state.change import Change
from ..state.handle import Handle

if TYPE_CHECKING:
    from .context import Ending


@dataclass(frozen=True)
class Interrupted:
    """What an Interrupt did, so the caller need not guess from the state afterwards."""

    from_state: HandleState  # running (turn aborted) or suspended (pending cancelled)
    cancelled_request: str  # the cancelled request's id; empty for a running turn
    inbox_restored: int  # drained inbox items the abandoned turn put back


async def interrupt(rt: Ending, h: Handle) -> Interrupted:
    """Abort ``h``'s running turn, or cancel its pending request; FAILED_PRECONDITION otherwise."""
    # the subtree a cancelled request may run through, read before anything is looked at
    subtree = await rt.table.walk(h.id) if h.state is HandleState.SUSPENDED else [h]
    prior = h.state
    restored = len(h.cp.drained) if h.cp is not None else 0
    cancelled = h.pending.id if h.pending is not None else ""
    if h.state is HandleState.RUNNING:
        await _stop_turn(rt, h)
        await _abandon(rt, h, HandleState.RUNNING, notes.interrupted(h.id), Status.INTERRUPTED)
        cancelled = ""
    elif h.state is HandleState.SUSPENDED:
        abandoned = False
        for member in _pending_chain(rt, h, subtree):
            kind = member.pending.kind if member.pending else ""
            abandoned |= await _abandon(rt, member, HandleState.SUSPENDED,
                                        notes.pending_cancelled(member.id, kind), Status.INTERRUPTED)
        if not abandoned:
            cancelled = ""  # answered (or closed) while the request's entry was read
    else:
        raise FailedPrecondition(f'handle "{h.id}" is {h.state}; only a running or suspended handle '
                                 "can be interrupted")
    return Interrupted(prior, cancelled, restored)


async def close(rt: Ending, h: Handle, reason: str, *, keep_result: bool = False) -> None:
    """Close ``h`` and its subtree, leaf first; a running turn gets the close grace first.

    ``keep_result`` keeps ``h``'s settled result as its last result (a ``task`` child, whose
    recorded result a reattaching parent must still find)."""
    for member in reversed(await rt.table.walk(h.id)):
        await _close_one(rt, member, reason, keep_result and member is h)


async def _close_one(rt: Ending, h: Handle, reason: str, keep_result: bool = False) -> None:
    while True:  # again when the handle moved on (answered, say) while its request was read
        if h.state is HandleState.CLOSED:
            return
        if h.state is HandleState.RUNNING:
            await _grace(rt, h)
        prior = h.state
        if h.state is not HandleState.IDLE:
            await _stop_turn(rt, h)
            keep_result = False
        if await _request_read(rt, h, prior):
            break
    if _closed_meanwhile(h):
        return  # a concurrent Close got here first while this one waited: one transition, one event
    result = h.result(Status.CLOSED, f"closed ({reason})")
    change = _drop_turn(rt, h)
    h.state = HandleState.CLOSED
    if not (keep_result and h.last_result is not None):
        h.last_result = result
    note = notes.closed(h.id, str(prior), reason)
    change.save(h).transition(h, prior, HandleState.CLOSED, note)
    change.event(h, EventType.CLOSED, note, result=result)
    await rt.commit(change)
    h.live.settle(result)


def _closed_meanwhile(h: Handle) -> bool:
    """The state re-read after an await (a type checker narrows the earlier check across it)."""
    return h.state is HandleState.CLOSED


async def _grace(rt: Ending, h: Handle) -> None:
    """Let a running turn finish within the runtime's close grace."""
    task = rt.turn_of(h)
    if task is None or task.done():
        return
    # asyncio.wait neither cancels the turn on timeout nor raises when a concurrent Close cancels
    # it (waiting on a shield of it did, which left that Close's RPC unanswered)
    await rt.deps.clock.wait_done(task, rt.options.close_grace_ms / 1000)


async def _stop_turn(rt: Ending, h: Handle) -> None:
    task = rt.turn_of(h)
    if task is not None and not task.done() and task is not asyncio.current_task():
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task


def _drop_turn(rt: Ending, h: Handle) -> Change:
    """Forget the open turn of ``h``: messages past the transcript, the checkpoint, the pending."""
    change = Change()
    cp = h.cp
    if cp is not None:
        h.inbox[0:0] = cp.drained
        change.truncate.append((h.id, cp.turn_start))
        h.log_len = h.committed_len = cp.turn_start
        change.checkpoint(h, None)
    if h.pending is not None:
        _cancel_request(rt, h, change)
    h.cp = None
    h.pending = None
    h.suspended_at = 0.0
    return change


def _cancel_request(rt: Ending, h: Handle, change: Change) -> None:
    assert h.pending is not None
    rt.requests.cancel(change, h.pending.id, h.id)


async def _request_read(rt: Ending, h: Handle, prior: HandleState) -> bool:
    """Read the entry of ``h``'s pending request through ``Store.read`` (off the event loop) for
    the ``_drop_turn`` that follows with nothing awaited between. False when ``h`` left ``prior``
    or its request changed meanwhile (answered, closed): what was read is dropped, and the caller
    looks at the handle again rather than ending a turn that is no longer the one it saw."""
    if h.pending is None:
        return True
    asked = h.pending.id
    await rt.requests.fetch(asked)
    if h.state is prior and h.pending is not None and h.pending.id == asked:
        return True
    rt.requests.unfetch()
    return False


async def _abandon(rt: Ending, h: Handle, prior: HandleState, note: str, status: Status) -> bool:
    """Drop ``h``'s turn and settle it ``status``; False when it left ``prior`` (or its request
    changed) while its request's entry was read, and nothing was done."""
    if not await _request_read(rt, h, prior):
        return False
    change = _drop_turn(rt, h)
    result = h.result(status, "interrupted")
    h.state = HandleState.IDLE
    h.last_result = result
    change.save(h).transition(h, prior, HandleState.IDLE, note)
    change.event(h, EventType.RESULT, note, result=result)
    await rt.commit(change)
    h.live.settle(result)
    return True


def _pending_chain(rt: Ending, h: Handle, subtree: list[Handle]) -> list[Handle]:
    """Every handle suspended on ``h``'s request in ``h``'s line (``subtree``, its walk, and its
    ancestors), leaf first."""
    assert h.pending is not None
    rid = h.pending.id
    line = subtree[::-1] + rt.table.ancestors(h)
    return [m for m in line if m.state is HandleState.SUSPENDED and m.pending is not None
            and m.pending.id == rid]


async def shutdown(rt: Ending) -> None:
    """Close every handle of the runtime leaf-first, the root last."""
    await close(rt, rt.table.handle(ROOT_ID), "shutdown")
