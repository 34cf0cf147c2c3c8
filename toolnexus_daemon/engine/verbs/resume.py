"""Routing and accepting an Answer (docs/protocol.md §1 point 2, §4 Resume).

An answer is routed by ``answer.id`` through the request index to the leaf
that suspended — never to "whatever is suspended". Accepting it is one
commit: the index entry is marked answered, the leaf and every ancestor
suspended on the same request go ``suspended→idle→running`` with the answer
in their checkpoints, and their turns are launched together. Each ancestor's
``task`` call then reattaches to its child by task key and waits for it, so
the cascade needs no scheduler of its own — and a crash mid-cascade simply
relaunches the running handles.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...errors import AlreadyAnswered, FailedPrecondition, InvalidArgument, NotFound
from ...model import JSON, Answer, EventType, HandleState, Request, TaskResult
from ..definitions import elicit_check
from ..definitions.fingerprint import DefinitionChange
from ..expiry.rule import EXPIRED, expired
from ..state import notes
from ..state.change import Change
from ..state.handle import Handle
from ..state.request_index import RequestEntry, WaitState
from ..turn import drift, tracing, upgrade
from ..turn.step import announce_reinvocations

if TYPE_CHECKING:
    from ..turn.context import Accepting

@dataclass(frozen=True)
class ResumeOutcome:
    handle: str  # the top-most handle the cascade reached
    result: TaskResult | None  # its settled result (None with no_wait)
    duplicate: bool


@dataclass(frozen=True)
class Accepted:
    """What ``accept`` decided: the handles to run (leaf first) or a duplicate to report."""

    chain: list[Handle]
    duplicate: bool


def accept(rt: Accepting, answer: Answer, handle_id: str, accept_changed: bool = False,
           to_latest: bool = False) -> tuple[Accepted, Change | None]:
    """Decide what ``answer`` does; the returned Change (if any) must be committed by the caller.

    ``accept_changed`` (``ResumeRequest.accept_changed_definition``) feeds the answer to a tool
    whose definition changed since it suspended; without it that is refused (docs/protocol.md §11).
    Either that or ``to_latest`` (``ResumeRequest.upgrade``) moves the chain and its idle subtree to
    the latest registry version; without them the answer is fed to the handles' own version."""
    if not answer.id:
        raise InvalidArgument("answer.id is required (the id of the pending Request)")
    entry = rt.requests.get(answer.id)
    if entry is None:
        raise NotFound(f'no request "{answer.id}" in runtime "{rt.id}" (unknown or already cancelled)')
    target = _pick(rt, answer.id, entry.pending(), handle_id)
    if target is None:
        return _duplicate_or_refuse(rt, answer, entry, handle_id), None
    leaf = rt.table.handle(target)
    asked = Request.from_json(entry.request)
    effective = _expired_as_decline(rt, answer, asked)
    elicit_check.check(asked, effective)  # an MCP form's answer must fit its schema (docs/mcp.md)
    chain = [leaf] + [a for a in rt.table.ancestors(leaf) if _suspended_on(a, answer.id)]
    change = Change()
    drifted: list[DefinitionChange] = []
    if to_latest or accept_changed:
        moving = upgrade.movable(rt, chain)
        upgrade.check(rt, moving)  # refuses (FailedPrecondition) before the answer is consumed
        drifted = drift.check_resume(rt, chain, answer.id, accept=accept_changed)  # so does a changed tool
        upgrade.move(rt, moving, change)
    for h in chain:
        rt.agent_of(h)  # refuses (FailedPrecondition) before the answer is consumed
    rt.requests.answer(change, answer.id, entry, target, answer, top=chain[-1].id,
                       expired=not effective.ok and effective.reason == EXPIRED)
    for h in chain:
        _restart(rt, h, effective, change, cascade=h is not leaf,
                 accepted_changes=[c.summary for c in drifted] if h is leaf else [])
    return Accepted(chain=chain, duplicate=False), change


def _pick(rt: Accepting, req_id: str, pending: list[str], handle_id: str) -> str | None:
    """The leaf to answer: the only pending one, or the one ``handle_id`` names (or sits above)."""
    if handle_id:
        rt.table.handle(handle_id)
        mine = [hid for hid in pending if hid == handle_id or hid.startswith(handle_id + "/")]
        if len(mine) > 1:
            raise FailedPrecondition(f'request "{req_id}" is pending on several handles below "{handle_id}" '
                                     f'({", ".join(mine)}); name the one to resume')
        return mine[0] if mine else None
    if len(pending) > 1:
        raise FailedPrecondition(f'request "{req_id}" is pending on several handles ({", ".join(pending)}); '
                                 "set ResumeRequest.handle to choose one")
    return pending[0] if pending else None


def _duplicate_or_refuse(rt: Accepting, answer: Answer, entry: RequestEntry, handle_id: str) -> Accepted:
    """No pending handle is left: the same answer again is a no-op; another one is refused."""
    for hid, wait in entry.waits.items():
        if handle_id and not (hid == handle_id or hid.startswith(handle_id + "/")):
            continue
        if wait.answer is not None and wait.answer == answer:
            return Accepted(chain=[rt.table.handle(wait.top or hid)], duplicate=True)
    state = next(iter(entry.waits.values())).state if entry.waits else WaitState.ANSWERED
    raise AlreadyAnswered(
        f'request "{answer.id}" was already {state}; a different answer cannot replace it')


def _expired_as_decline(rt: Accepting, answer: Answer, request: Request) -> Answer:
    """An answer at or after ``expires_at`` is a decline with reason ``expired`` (at that instant the
    daemon's own decline is due too: both agree, whichever reaches the lock first)."""
    if expired(request, rt.deps.clock.now()):
        return Answer(answer.id, ok=False, data=answer.data, reason=EXPIRED)
    return answer


def _suspended_on(h: Handle, request_id: str) -> bool:
    return h.state is HandleState.SUSPENDED and h.pending is not None and h.pending.id == request_id


def _restart(rt: Accepting, h: Handle, answer: Answer, change: Change, *, cascade: bool,
             accepted_changes: list[str]) -> None:
    """``suspended→idle→running`` with the answer waiting in the checkpoint, and the calls it
    re-runs announced with their new call_ids."""
    assert h.cp is not None, f"suspended handle {h.id} has no checkpoint"
    h.cp.answer = answer
    h.cp.fingerprint = None  # the suspension it described is over
    if tracing.caller.get():  # a Resume under a trace: the continuation is a child of its caller
        h.cp.trace_parent = tracing.caller.get()
    h.pending = None
    h.suspended_at = 0.0
    h.state = HandleState.RUNNING
    change.save(h).checkpoint(h, h.cp)
    note = notes.resume_at_checkpoint(h.id, answer.ok, h.turns_total)
    data: JSON = {"request_id": answer.id, "ok": answer.ok}
    if accepted_changes:  # fed to a changed definition, as the caller asked: say so in the log
        data["accepted_changed_definition"] = accepted_changes
    change.event(h, EventType.RESUMED, note, data=data)
    if cascade:
        change.event(h, EventType.REATTACH, notes.cascade(h.id))
    change.transition(h, HandleState.SUSPENDED, HandleState.IDLE, notes.answer_accepted(h.id))
    change.transition(h, HandleState.IDLE, HandleState.RUNNING, notes.running_again(h.id))
    announce_reinvocations(rt, h, h.cp, change)
