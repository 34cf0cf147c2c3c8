"""A task's status read from its handle's events, in the order the engine commits them: one status
per change, never a state half-way through a commit (the subprocess tests in test_tasks.py send
these over a real session; this covers the sequences a scripted model cannot easily make)."""

from __future__ import annotations

from toolnexus_daemon.mcp_edge.runs import Run
from toolnexus_daemon.mcp_edge.status import STATUS_EVENTS, Tracker
from toolnexus_daemon.mcp_edge.verbs import View
from toolnexus_daemon.model import Event, EventType, HandleState, Request, Status, TaskResult

RUN = Run("demo", "root/approver.1")
ASKED = Request(id="approval-1", kind="approval", prompt="approve?")
SECOND = Request(id="approval-2", kind="approval", prompt="really?")


def _ev(type_: EventType, *, to: HandleState | None = None, frm: HandleState | None = None,
        pending: Request | None = None, result: TaskResult | None = None) -> Event:
    return Event(seq=1, runtime_id=RUN.runtime_id, handle=RUN.handle, type=type_, at="2026-12-05T10:00:00.5Z",
                 from_state=str(frm or ""), to_state=str(to or ""), pending=pending, result=result)


def _moved(frm: HandleState, to: HandleState) -> Event:
    return _ev(EventType.TRANSITION, frm=frm, to=to)


def _result(status: Status, text: str = "", pending: Request | None = None) -> TaskResult:
    return TaskResult(status=status, text=text, is_error=status not in (Status.DONE, Status.PENDING),
                      pending=pending)


IDLE, RUN_, SUSP, CLOSED = HandleState.IDLE, HandleState.RUNNING, HandleState.SUSPENDED, HandleState.CLOSED
SPAWN = [_ev(EventType.SPAWNED), _moved(IDLE, RUN_)]
SUSPEND = [_moved(RUN_, SUSP), _ev(EventType.PENDING, pending=ASKED),
           _ev(EventType.RESULT, result=_result(Status.PENDING, "approve?", ASKED))]
RESUME = [_ev(EventType.RESUMED), _moved(SUSP, IDLE), _moved(IDLE, RUN_)]
DONE = [_moved(RUN_, IDLE), _ev(EventType.RESULT, result=_result(Status.DONE, "action performed"))]


def _statuses(events: list[Event]) -> list[tuple[str, str | None]]:
    tracker = Tracker(RUN, View(RUN.handle, IDLE, 1, None, None, spawned_at=1.0))
    changes = [tracker.step(e) for e in events if e.type in STATUS_EVENTS]
    return [(t.status, t.status_message) for t in changes if t is not None]


def test_suspended_answered_and_done() -> None:
    assert _statuses(SPAWN + SUSPEND + RESUME + DONE) == [
        ("input_required", "waiting for an answer to approval-1: approve?"),
        ("working", None),
        ("completed", None)]


def test_two_questions_in_a_row_each_pass_through_working() -> None:
    again = [_moved(RUN_, SUSP), _ev(EventType.PENDING, pending=SECOND),
             _ev(EventType.RESULT, result=_result(Status.PENDING, "really?", SECOND))]
    got = _statuses(SPAWN + SUSPEND + RESUME + again + RESUME + DONE)
    assert [s for s, _ in got] == ["input_required", "working", "input_required", "working", "completed"]
    assert got[2][1] == "waiting for an answer to approval-2: really?"


def test_an_escalation_is_input_required_until_answered_inline() -> None:
    escalate = [_moved(RUN_, SUSP), _ev(EventType.ESCALATE, pending=ASKED)]
    back = [_moved(SUSP, RUN_), _ev(EventType.RESUMED)]
    assert [s for s, _ in _statuses(SPAWN + escalate + back + DONE)] == ["input_required", "working",
                                                                          "completed"]


def test_a_suspended_task_closed_is_cancelled_not_input_required() -> None:
    closed = [_moved(SUSP, CLOSED),
              _ev(EventType.CLOSED, result=_result(Status.CLOSED, "closed by the caller"))]
    assert _statuses(SPAWN + SUSPEND + closed) == [
        ("input_required", "waiting for an answer to approval-1: approve?"),
        ("cancelled", "[closed] closed by the caller")]


def test_an_error_fails_the_task_and_an_interruption_cancels_it() -> None:
    failed = [_moved(RUN_, IDLE), _ev(EventType.RESULT, result=_result(Status.ERROR, "model unreachable"))]
    assert _statuses(SPAWN + failed) == [("failed", "[error] model unreachable")]
    interrupted = [_moved(SUSP, IDLE), _ev(EventType.RESULT, result=_result(Status.INTERRUPTED, "stopped"))]
    assert _statuses(SPAWN + SUSPEND + interrupted)[-1] == ("cancelled", "[interrupted] stopped")


def test_the_last_update_is_the_events_time() -> None:
    tracker = Tracker(RUN, View(RUN.handle, IDLE, 1, None, None, spawned_at=1.0))
    for event in SPAWN[1:] + SUSPEND[:2]:
        task = tracker.step(event)
    assert task is not None
    assert (task.created_at, task.last_updated_at) == ("1970-01-01T00:00:01Z", "2026-12-05T10:00:00.500000Z")
