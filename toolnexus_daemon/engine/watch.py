"""The resumable event stream of one runtime (docs/protocol.md §3 ``Watch``).

A watcher subscribes to the live bus *before* it replays the store, so no
event can fall between the replay and the live tail; live events it already
replayed are skipped by seq. A watcher too slow for its bounded queue is
dropped by the bus and simply replays again from the store — memory stays
bounded and the stream stays gapless.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Iterator
from typing import TYPE_CHECKING

from ..model import Event, EventType

if TYPE_CHECKING:
    from .context import RuntimeContext

REPLAY_PAGE = 500


def _wanted(ev: Event, types: frozenset[EventType], handle: str) -> bool:
    return (not types or ev.type in types) and (not handle or ev.handle == handle)


async def watch(rt: RuntimeContext, after_seq: int, types: frozenset[EventType],
                handle: str) -> AsyncGenerator[Event, None]:
    """Replay stored events with ``seq > after_seq``, then follow live until the runtime stops."""
    last = after_seq
    while True:
        rt.check_retained(last)  # a watcher dropped for lagging may have fallen out of the window
        sub = rt.bus.subscribe()
        try:
            for ev in _replay(rt, last):
                last = ev.seq
                if _wanted(ev, types, handle):
                    yield ev
            while True:
                for text in sub.take_text():
                    if _wanted(text, types, handle):
                        yield text
                if sub.overflowed and sub.queue.empty():
                    break  # dropped by the bus: replay the rest from the store
                live = await sub.queue.get()
                if live is None:
                    return
                if live.seq and live.seq <= last:
                    continue
                last = live.seq or last
                if _wanted(live, types, handle):
                    yield live
        finally:
            rt.bus.unsubscribe(sub)


def _replay(rt: RuntimeContext, after: int) -> Iterator[Event]:
    """Stored events page by page, so a long log is never held in memory at once."""
    while True:
        page = rt.deps.store.events(rt.id, after, REPLAY_PAGE)
        yield from page
        if len(page) < REPLAY_PAGE:
            return
        after = page[-1].seq
