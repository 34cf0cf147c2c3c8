"""Live fan-out: stored events in order, text deltas coalesced for a slow watcher, bounded memory."""

from __future__ import annotations

from toolnexus_daemon.events import TEXT_BACKLOG_CHARS, TEXT_HIGH_WATER, EventBus
from toolnexus_daemon.model import Event, EventType


def _stored(seq: int) -> Event:
    return Event(seq=seq, runtime_id="rt", handle="root/a.1", type=EventType.TRANSITION)


def _text(delta: str, handle: str = "root/a.1") -> Event:
    return Event(seq=0, runtime_id="rt", handle=handle, type=EventType.TEXT, data={"delta": delta})


def test_a_watcher_that_keeps_up_gets_every_delta_as_it_comes() -> None:
    bus = EventBus()
    sub = bus.subscribe()
    bus.publish([_text("Hel"), _text("lo")])
    assert [sub.queue.get_nowait().data for _ in range(2)] == [{"delta": "Hel"}, {"delta": "lo"}]
    assert sub.take_text() == []


def test_a_slow_watcher_gets_coalesced_text_and_no_stored_event_is_lost() -> None:
    bus = EventBus()
    sub = bus.subscribe()
    bus.publish([_stored(i) for i in range(1, TEXT_HIGH_WATER + 1)])
    bus.publish([_text("a"), _text("b"), _text("x", handle="root/b.1"), _text("c")])
    assert sub.queue.qsize() == TEXT_HIGH_WATER, "deltas were not queued behind the backlog"
    assert sub.take_text() == [], "nothing is released while the watcher is still behind"
    seqs = [sub.queue.get_nowait().seq for _ in range(TEXT_HIGH_WATER)]
    assert seqs == list(range(1, TEXT_HIGH_WATER + 1))
    released = sub.take_text()
    assert [(e.handle, e.data) for e in released] == [("root/a.1", {"delta": "abc", "coalesced": True}),
                                                      ("root/b.1", {"delta": "x", "coalesced": True})]
    assert not sub.overflowed


def test_the_backlog_is_bounded() -> None:
    bus = EventBus()
    sub = bus.subscribe()
    bus.publish([_stored(i) for i in range(1, TEXT_HIGH_WATER + 1)])
    bus.publish([_text("y" * 1000) for _ in range(200)] + [_text("END")])
    while not sub.queue.empty():
        sub.queue.get_nowait()
    (released,) = sub.take_text()
    delta = str((released.data or {})["delta"])
    assert len(delta) == TEXT_BACKLOG_CHARS and delta.endswith("END"), "the newest text is kept"
