"""The metrics census of handle states and open suspensions, fed by summaries and events."""

from __future__ import annotations

from toolnexus_daemon.metrics import Census
from toolnexus_daemon.model import Event, EventType, Request


def transition(handle: str, old: str, new: str) -> Event:
    return Event(seq=0, runtime_id="r1", handle=handle, type=EventType.TRANSITION, note="", at="",
                 from_state=old, to_state=new)


def pending(handle: str, request_id: str, kind: str = "approval") -> Event:
    return Event(seq=0, runtime_id="r1", handle=handle, type=EventType.PENDING, note="", at="",
                 pending=Request(id=request_id, kind=kind, prompt="ok?"))


def test_a_request_shared_by_a_nested_chain_is_one_open_suspension_until_all_release() -> None:
    now = [100.0]
    census = Census(lambda: now[0])
    census.load("r1", [
        {"id": "root", "state": "idle"},
        {"id": "root/p.1", "state": "suspended", "pending": {"id": "q", "kind": "approval"}, "suspended_at": 40.0},
        {"id": "root/p.1/c.1", "state": "suspended", "pending": {"id": "q", "kind": "approval"},
         "suspended_at": 40.0},
        {"id": "root/x.2", "state": "suspended", "escalating": True, "pending": {"id": "e", "kind": "input"}},
        {"id": "root/y.3", "state": "idle"}])

    assert census.suspensions() == {"approval": (1, 60.0)}
    assert (census.handle_states()["suspended"], census.handle_states()["running"]) == (2, 1)

    census.apply("r1", transition("root/p.1/c.1", "suspended", "running"))
    assert census.suspensions() == {"approval": (1, 60.0)}  # the parent still waits on it
    census.apply("r1", transition("root/p.1", "suspended", "running"))
    assert census.suspensions() == {}

    now[0] = 110.0
    census.apply("r1", pending("root/y.3", "i", kind="input"))
    now[0] = 115.0
    assert census.suspensions() == {"input": (1, 5.0)}
    census.forget("r1")
    assert census.suspensions() == {} and census.handle_states()["suspended"] == 0
