"""A handle's state that exists only in this daemon's memory, with one owner: ``Live``.

Who waits for the handle's next settled result (Wait, a fused Wake or Spawn, a Resume) and the
lock its inline escalations take are kept here, on the handle object, and changed only through
these methods: a waiter is added and dropped here and every waiter hears a settle here, and the
escalation lock exists only while an escalation of the handle holds it or waits for it, so a
runtime that escalates many handles keeps no lock per handle it ever escalated. The handle cache
never splits a handle's identity while anything refers to it, so the object is the owner.

The task running a handle's turn is not here: it is the runtime's residency's
(``verbs/residency.py``), in one table by handle id, because stopping a runtime must reach every
turn it runs, including one whose handle left the cache.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from ...model import TaskResult


class Live:
    """The waiters of one handle's next settled result and its escalation lock."""

    __slots__ = ("_escalation", "_escalations", "_waiters")

    def __init__(self) -> None:
        self._waiters: list[asyncio.Future[TaskResult]] = []
        self._escalation: asyncio.Lock | None = None
        self._escalations = 0  # escalations holding the lock or waiting for it

    # ------------------------------------------------------------------ waiters

    def waiter(self) -> asyncio.Future[TaskResult]:
        """A new waiter of the next settled result, registered before the caller yields."""
        fut: asyncio.Future[TaskResult] = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        return fut

    def drop(self, fut: asyncio.Future[TaskResult]) -> None:
        """Unregister ``fut`` (its caller left, or got its result); nothing when it is not here."""
        if fut in self._waiters:
            self._waiters.remove(fut)

    def settle(self, result: TaskResult) -> None:
        """Every waiter hears ``result``; the next settle has none until new ones register."""
        waiters, self._waiters = self._waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(result)

    @property
    def waiting(self) -> int:
        """How many waiters are registered."""
        return len(self._waiters)

    # ------------------------------------------------------------------ escalation

    @asynccontextmanager
    async def escalation(self) -> AsyncIterator[None]:
        """Hold the handle's escalation lock: inline escalations of one handle run one at a time
        (its state flips once per escalation). The lock is dropped when the last one leaves."""
        if self._escalation is None:
            self._escalation = asyncio.Lock()
        lock = self._escalation
        self._escalations += 1
        try:
            async with lock:
                yield
        finally:
            self._escalations -= 1
            if self._escalations == 0:
                self._escalation = None

    @property
    def escalation_lock(self) -> asyncio.Lock | None:
        """The escalation lock while an escalation holds or waits for it; None otherwise."""
        return self._escalation
