"""The resumable event stream of one runtime (docs/protocol.md §3 ``Watch``).

A watcher subscribes to the live bus *before* it replays the store, so no
event can fall between the replay and the live tail; live events it already
replayed are skipped by seq.

What one watcher holds is bounded by bytes, however slowly its client reads:
the replay reads the store in pages of at most ``REPLAY_BYTES`` of stored
records (at least one event) and hands each event on as it is taken from the
page, so an event written to the client is no longer held by the page, and
the next page is read only once the last one is written; the live tail is the
bus's queue, bounded by count and bytes (``events.SUBSCRIBER_BYTES``). A
watcher whose queue overflows is not fed again from the store (a client that
does not read would keep the daemon holding a page for it for ever): after
the events queued before the overflow, its stream ends with ``FellBehind``
(RESOURCE_EXHAUSTED) naming the seq to resume from.
"""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator
from typing import TYPE_CHECKING

from ...errors import ResourceExhausted
from ...events import SUBSCRIBER_BYTES, SUBSCRIBER_QUEUE
from ...model import Event, EventType

if TYPE_CHECKING:
    from ...store.base import Store
    from ..turn.context import Watched

REPLAY_PAGE = 500
REPLAY_BYTES = 256 << 10


class FellBehind(ResourceExhausted):
    """A watcher's client read more slowly than the runtime made events; ``after_seq`` is where to
    resume (every event up to it was sent, or filtered out)."""

    def __init__(self, after_seq: int) -> None:
        super().__init__(f"this Watch fell more than {SUBSCRIBER_QUEUE} events or "
                         f"{SUBSCRIBER_BYTES >> 20} MB behind the live events (its client reads too "
                         f"slowly); Watch again with after_seq={after_seq}")
        self.after_seq = after_seq


def _wanted(ev: Event, types: frozenset[EventType], handle: str) -> bool:
    return (not types or ev.type in types) and (not handle or ev.handle == handle)


async def watch(rt: Watched, after_seq: int, types: frozenset[EventType],
                handle: str) -> AsyncGenerator[Event, None]:
    """Replay stored events with ``seq > after_seq``, then follow live until the runtime stops."""
    last = after_seq
    rt.check_retained(last)
    sub = rt.bus.subscribe()
    try:
        replay = _replay(rt, last)
        while (ev := await anext(replay, None)) is not None:
            last = ev.seq
            if _wanted(ev, types, handle):
                held, ev = [ev], None
                yield held.pop()  # not kept by this frame while the client takes it
        while True:
            for text in sub.take_text():
                if _wanted(text, types, handle):
                    yield text
            if sub.overflowed and sub.queue.empty():
                raise FellBehind(last)
            live = await sub.queue.get()
            if live is None:
                return
            if live.seq and live.seq <= last:
                continue
            last = live.seq or last
            if _wanted(live, types, handle):
                held, live = [live], None
                yield held.pop()
    finally:
        rt.bus.unsubscribe(sub)


def _page(runtime_id: str, after: int, store: Store) -> list[Event]:
    return store.events(runtime_id, after, REPLAY_PAGE, max_bytes=REPLAY_BYTES)


async def _replay(rt: Watched, after: int) -> AsyncIterator[Event]:
    """Stored events in pages bounded by bytes, each event let go of by the page as it is taken."""
    while True:
        page = deque(await rt.deps.store.read(functools.partial(_page, rt.id, after)))
        if not page:
            return
        after = page[-1].seq
        while page:
            yield page.popleft()
