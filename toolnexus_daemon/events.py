"""Live fan-out of committed events to watchers, one bus per runtime.

Events are published only after their commit, in seq order (the runtime
publishes under its commit lock), so a watcher never sees an event whose
state was lost. Each subscriber has a bounded queue; a subscriber that falls
too far behind is dropped with ``overflowed`` set, and its Watch re-reads the
store from its last seq instead of holding memory for it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from .model import Event

SUBSCRIBER_QUEUE = 10_000


@dataclass(eq=False)
class Subscription:
    queue: asyncio.Queue[Event | None] = field(default_factory=lambda: asyncio.Queue(SUBSCRIBER_QUEUE))
    overflowed: bool = False


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
