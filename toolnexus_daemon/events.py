"""Live fan-out of committed events to watchers, one bus per runtime.

Events are published only after their commit, in seq order (the runtime
publishes under its commit lock), so a watcher never sees an event whose
state was lost. Each subscriber has a bounded queue; a subscriber that falls
too far behind is dropped with ``overflowed`` set, and its Watch re-reads the
store from its last seq instead of holding memory for it.

Streamed model text (``text`` events, live only, never stored) must never
push a watcher into that overflow: once a subscriber's queue is past
``TEXT_HIGH_WATER``, further deltas are coalesced per handle into a bounded
backlog that the watcher takes as one ``text`` event when it catches up.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field, replace

from .model import Event, EventType

SUBSCRIBER_QUEUE = 10_000
# past this many queued events, text deltas are coalesced instead of queued
TEXT_HIGH_WATER = 256
# the most text kept per handle for a slow watcher; older text is dropped first
TEXT_BACKLOG_CHARS = 64 * 1024


@dataclass(eq=False)
class Subscription:
    queue: asyncio.Queue[Event | None] = field(default_factory=lambda: asyncio.Queue(SUBSCRIBER_QUEUE))
    overflowed: bool = False
    # handle -> (first coalesced text event, the text gathered since)
    text_backlog: dict[str, tuple[Event, str]] = field(default_factory=dict)

    def offer_text(self, ev: Event) -> None:
        """Queue a delta, or fold it into the backlog when the watcher is behind."""
        if self.queue.qsize() < TEXT_HIGH_WATER and ev.handle not in self.text_backlog:
            self.queue.put_nowait(ev)
            return
        first, text = self.text_backlog.get(ev.handle, (ev, ""))
        text = (text + str((ev.data or {}).get("delta", "")))[-TEXT_BACKLOG_CHARS:]
        self.text_backlog[ev.handle] = (first, text)

    def take_text(self) -> list[Event]:
        """The coalesced deltas, one ``text`` event per handle, once the watcher has caught up."""
        if not self.text_backlog or self.queue.qsize() >= TEXT_HIGH_WATER // 2:
            return []
        backlog, self.text_backlog = self.text_backlog, {}
        return [replace(first, data={"delta": text, "coalesced": True}) for first, text in backlog.values()]


class EventBus:
    def __init__(self) -> None:
        self._subs: list[Subscription] = []

    def subscribe(self) -> Subscription:
        sub = Subscription()
        self._subs.append(sub)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        if sub in self._subs:
            self._subs.remove(sub)

    def count(self) -> int:
        return len(self._subs)

    def publish(self, events: list[Event]) -> None:
        for sub in list(self._subs):
            for ev in events:
                if ev.type is EventType.TEXT:
                    sub.offer_text(ev)
                    continue
                try:
                    sub.queue.put_nowait(ev)
                except asyncio.QueueFull:
                    sub.overflowed = True
                    self.unsubscribe(sub)
                    break

    def close(self) -> None:
        """End every subscription (the runtime was shut down or the daemon stops)."""
        for sub in list(self._subs):
            self.unsubscribe(sub)
            try:
                sub.queue.put_nowait(None)
            except asyncio.QueueFull:
                sub.overflowed = True
