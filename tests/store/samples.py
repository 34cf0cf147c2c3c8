"""Records and events for the store tests; the store treats records as opaque JSON."""

from __future__ import annotations

from toolnexus_daemon.model import JSON, Event, EventType, Request, Status, TaskResult


def record(**fields: object) -> JSON:
    return {"nested": {"list": [1, "two", None, 3.5]}, "text": "héllo ✓", **fields}


def event(runtime_id: str, seq: int, note: str = "") -> Event:
    return Event(seq=seq, runtime_id=runtime_id, handle="root", type=EventType.TRANSITION,
                 note=note or f"e{seq}", at="2025-01-01T00:00:00Z", from_state="idle", to_state="running")


def rich_event(runtime_id: str, seq: int) -> Event:
    """An event using every optional field, so its round trip checks them all."""
    pending = Request(id="req-1", kind="approval", prompt="ok?", data={"amount": 3})
    result = TaskResult(status=Status.PENDING, text="waiting", is_error=False, pending=pending, turns=2)
    return Event(seq=seq, runtime_id=runtime_id, handle="root/child", type=EventType.PENDING, note="parked",
                 at="2025-01-01T00:00:01Z", pending=pending, result=result, data={"k": [1, 2]})
