"""The single-level loop, durable suspension and resume on the in-memory store (docs/protocol.md §4)."""

from __future__ import annotations

import asyncio

import pytest

from toolnexus_daemon.clock import rfc3339
from toolnexus_daemon.engine.verbs.runtime import Runtime
from toolnexus_daemon.errors import FailedPrecondition, InvalidArgument, NotFound
from toolnexus_daemon.model import (
    AgentDef,
    Answer,
    EventType,
    HandleState,
    Request,
    Status,
    ToolDef,
    ToolResult,
)
from toolnexus_daemon.tools.base import ToolInvocation
from toolnexus_devtools import mock_model

from .conftest import Bench, new_runtime

SECRET = AgentDef(name="secret", does="does secret things", tools=(ToolDef(name="secret_action"),))


def secret_action(args: dict, inv: ToolInvocation) -> ToolResult:  # type: ignore[type-arg]
    """Suspends with an authorization request until answered (the reference scenario tool)."""
    if inv.answer is None:
        return ToolResult(output="", pending=Request(id="", kind="authorization", prompt="approve?"))
    return ToolResult(output="action performed")


async def _suspended(bench: Bench) -> tuple[Runtime, str, str]:
    bench.model.script = mock_model
    bench.tools.functions["secret_action"] = secret_action
    rt = await new_runtime(bench, "rt1", SECRET)
    h = await rt.spawn("root", "secret")
    await rt.wake(h.id, "do it")
    result = await rt.wait(h.id, 5000)
    assert result.status is Status.PENDING and result.pending is not None
    return rt, h.id, result.pending.id


async def test_suspend_then_resume_ok_performs_the_action(bench: Bench) -> None:
    """An ok answer re-invokes the suspended call with the answer; the model then answers."""
    rt, hid, req_id = await _suspended(bench)
    snap = rt.snapshot(hid)
    assert snap.state is HandleState.SUSPENDED and snap.pending.kind == "authorization"
    assert snap.pending.data == {"path": hid.split("/")} == {"path": ["root", "secret.1"]}
    before = snap.usage.total_tokens
    out = await rt.resume(Answer(id=req_id, ok=True))
    assert out.handle == hid and out.result.status is Status.DONE and not out.duplicate
    assert out.result.text == "action performed"
    snap = rt.snapshot(hid)
    assert snap.state is HandleState.IDLE and snap.usage.total_tokens > before and snap.turns_total >= 2
    assert len(bench.model.bodies) == 2, "resume continues from the checkpoint, not a fresh model call"
    assert [inv.answer for inv in bench.tools.ledger] == [None, Answer(id=req_id, ok=True)]


async def test_decline_is_fed_back_as_declined_expired(bench: Bench) -> None:
    rt, hid, req_id = await _suspended(bench)
    out = await rt.resume(Answer(id=req_id, ok=False, reason="not authorized"))
    assert out.result.status is Status.DONE and not out.result.is_error
    assert out.result.text == "declined/expired: approve?"
    assert bench.tools.ledger[-1].answer is None, "a declined call is invoked fresh"


async def test_answers_are_routed_by_id(bench: Bench) -> None:
    rt, hid, req_id = await _suspended(bench)
    with pytest.raises(NotFound, match="no request"):
        await rt.resume(Answer(id="nope", ok=True))
    with pytest.raises(InvalidArgument):
        await rt.resume(Answer(id="", ok=True))
    with pytest.raises(FailedPrecondition, match=req_id):
        await rt.wake(hid, "again")
    first = await rt.resume(Answer(id=req_id, ok=True))
    calls = len(bench.tools.ledger)
    again = await rt.resume(Answer(id=req_id, ok=True))
    assert again.duplicate and again.result == first.result and len(bench.tools.ledger) == calls
    with pytest.raises(FailedPrecondition, match="already answered"):
        await rt.resume(Answer(id=req_id, ok=False))


async def test_events_trace_the_durable_suspension(bench: Bench) -> None:
    rt, hid, req_id = await _suspended(bench)
    await rt.resume(Answer(id=req_id, ok=True))
    events = bench.store.events("rt1", 0, 1000)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    notes = [e.note for e in events if e.type is EventType.TRANSITION]
    assert notes == [
        f"{hid}: idle→running (wake)",
        f'{hid}: running→suspended DURABLE (pending "authorization", path preserved)',
        f"{hid}: suspended→idle (Answer accepted, checkpoint restored)",
        f"{hid}: idle→running (resume)",
        f"{hid}: running→idle (done, turns=2, tokens=8)",
    ]
    pending = [e for e in events if e.type is EventType.PENDING]
    assert len(pending) == 1 and pending[0].pending is not None and pending[0].pending.id == req_id


async def test_transcript_commits_only_completed_turns(bench: Bench) -> None:
    rt, hid, req_id = await _suspended(bench)
    h = rt.snapshot(hid)
    assert h.committed_len == 0, "nothing of a suspended turn is in the transcript"
    await rt.resume(Answer(id=req_id, ok=True))
    roles = [m["role"] for m in bench.store.messages("rt1", hid, 0, h.committed_len)]
    assert roles == ["user", "assistant", "tool", "assistant"]


async def test_wait_timeout_leaves_the_handle_running(bench: Bench) -> None:
    gate = asyncio.Event()

    async def slow(args: dict, inv: ToolInvocation) -> ToolResult:  # type: ignore[type-arg]
        await gate.wait()
        return ToolResult(output="late")

    bench.model.script = mock_model
    bench.tools.functions["secret_action"] = slow
    rt = await new_runtime(bench, "rt2", SECRET)
    h = await rt.spawn("root", "secret")
    await rt.wake(h.id, "go")
    waiting = asyncio.create_task(rt.wait(h.id, 50))
    for _ in range(20):  # let the turn reach the tool: time stands still meanwhile
        await asyncio.sleep(0)
    assert not waiting.done(), "on the virtual clock no time passed yet"
    bench.clock.advance(0.049)
    await asyncio.sleep(0)
    assert not waiting.done(), "49 virtual ms are short of the 50 ms timeout"
    bench.clock.advance(0.001)
    result = await waiting
    assert result.status is Status.TIMEOUT and result.text == "wait timeout after 50ms (child still running)"
    assert rt.snapshot(h.id).state is HandleState.RUNNING
    gate.set()
    final = await rt.wait(h.id, 5000)
    assert final.status is Status.DONE and final.text == "late"


async def test_the_same_request_pending_on_two_handles_needs_a_handle(bench: Bench) -> None:
    def shared(args: dict, inv: ToolInvocation) -> ToolResult:  # type: ignore[type-arg]
        if inv.answer is None:
            return ToolResult(output="", pending=Request(id="shared-approval", kind="approval", prompt="ok?"))
        return ToolResult(output=f"approved for {inv.handle}")

    bench.model.script = mock_model
    bench.tools.functions["secret_action"] = shared
    rt = await new_runtime(bench, "twice", SECRET)
    a, b = await rt.spawn("root", "secret"), await rt.spawn("root", "secret")
    for h in (a, b):
        await rt.wake(h.id, "go")
        assert (await rt.wait(h.id, 5000)).status is Status.PENDING
    with pytest.raises(FailedPrecondition, match="pending on several handles"):
        await rt.resume(Answer(id="shared-approval", ok=True))
    out = await rt.resume(Answer(id="shared-approval", ok=True), handle_id=b.id)
    assert out.handle == b.id and out.result is not None and out.result.text == f"approved for {b.id}"
    assert rt.snapshot(a.id).state is HandleState.SUSPENDED, "the other handle still waits"


async def _expiring_in_an_hour(bench: Bench, rid: str) -> Runtime:
    expires = rfc3339(bench.clock.now() + 3600)

    def expiring(args: dict, inv: ToolInvocation) -> ToolResult:  # type: ignore[type-arg]
        if inv.answer is None:
            return ToolResult(output="", pending=Request(id="late", kind="approval", prompt="approve?",
                                                         expires_at=expires))
        return ToolResult(output="action performed")

    bench.model.script = mock_model
    bench.tools.functions["secret_action"] = expiring
    rt = await new_runtime(bench, rid, SECRET)
    h = await rt.spawn("root", "secret")
    await rt.wake(h.id, "go")
    await rt.wait(h.id, 5000)
    return rt


async def test_an_answer_after_expiry_is_a_decline(bench: Bench) -> None:
    """On the virtual clock: an hour and a second after the request, ok counts as a decline."""
    rt = await _expiring_in_an_hour(bench, "expiry")
    bench.clock.advance(3601)
    out = await rt.resume(Answer(id="late", ok=True))
    assert out.result is not None and out.result.text == "declined/expired: approve?"
    assert bench.tools.ledger[-1].answer is None, "treated as a decline: invoked fresh"


async def test_an_answer_just_before_expiry_is_accepted(bench: Bench) -> None:
    rt = await _expiring_in_an_hour(bench, "in-time")
    bench.clock.advance(3599)
    out = await rt.resume(Answer(id="late", ok=True))
    assert out.result is not None and out.result.text == "action performed"


async def test_impossible_ids_are_unknown_not_internal_errors(bench: Bench) -> None:
    rt, hid, req_id = await _suspended(bench)
    with pytest.raises(NotFound):
        rt.snapshot("root/\x00evil")
    with pytest.raises(NotFound):
        await rt.resume(Answer(id="x" * 300, ok=True))
    assert rt.snapshot(hid).suspended_at > 0, "the suspension records when it began"
    await rt.resume(Answer(id=req_id, ok=True))
    assert rt.snapshot(hid).suspended_at == 0
