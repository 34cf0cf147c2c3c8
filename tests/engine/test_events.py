"""Live fan-out: stored events in order, text deltas coalesced for a slow watcher, bounded memory."""

from __future__ import annotations

import pytest

from toolnexus_daemon.errors import OutOfRange
from toolnexus_daemon.events import TEXT_BACKLOG_CHARS, TEXT_HIGH_WATER, EventBus
from toolnexus_daemon.model import AgentDef, Event, EventType
from toolnexus_devtools import chat_response

from .conftest import Bench, new_runtime


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


async def test_event_retention_drops_the_oldest_and_refuses_a_stale_watch(bench: Bench) -> None:
    bench.model.script = lambda body: chat_response(content="ok")
    rt = await new_runtime(bench, "ret", AgentDef(name="a"), event_retention=5)
    h = await rt.spawn("root", "a")
    for _ in range(3):
        await rt.wake(h.id, "go")
        await rt.wait(h.id, 5000)
    stored = bench.store.events("ret", 0, 100)
    assert len(stored) == 5 and stored[-1].seq == rt.last_seq()
    assert rt.first_seq == stored[0].seq > 1
    with pytest.raises(OutOfRange, match=f"the first retained seq is {rt.first_seq}"):
        rt.watch(0, frozenset(), "")
    replayed = []
    async for ev in rt.watch(rt.first_seq - 1, frozenset(), ""):
        replayed.append(ev.seq)
        if ev.seq == rt.last_seq():
            break
    assert replayed == [e.seq for e in stored]


async def test_past_a_larger_retention_the_oldest_events_are_dropped_in_batches(bench: Bench) -> None:
    """Retention 64: up to 64/16 = 4 events past it wait for the next drop, which then keeps 64."""
    bench.model.script = lambda body: chat_response(content="ok")
    rt = await new_runtime(bench, "batched", AgentDef(name="a"), event_retention=64)
    h = await rt.spawn("root", "a")
    counts = set()
    for _ in range(30):
        await rt.wake(h.id, "go")
        await rt.wait(h.id, 5000)
        stored = bench.store.events("batched", 0, 1000)
        assert 64 <= len(stored) <= 64 + 4 or rt.last_seq() < 64
        assert stored[0].seq == rt.first_seq and stored[-1].seq == rt.last_seq()
        counts.add(len(stored))
    assert rt.last_seq() > 100 and len(counts - {64}) > 0 and 64 in counts
