"""Deadlines that fire: an open suspension whose ``expires_at`` passes is declined by the daemon.

One scheduler per daemon sleeps on the engine's clock until the soonest deadline it
knows of and then resolves every due suspension of that runtime through ``Resume``
itself — ``Answer(ok=False, reason="expired")`` routed to the leaf — so the cascade,
the events, the request index and the watchers of ``Wait`` are exactly those of an
answer, and the model reads ``declined/expired: <prompt>`` (docs/protocol.md §10).

It never reads every handle: it keeps only each runtime's next deadline, which comes
from the store's expiry index (``Store.expiring``, kept in the transaction of every
handle write) when a runtime is loaded or taken over, and from the ``pending`` events
committed while it is served. An answer racing the deadline is settled by ``Resume``'s
own lock: whichever comes second finds the request settled (a duplicate, or
FAILED_PRECONDITION) and changes nothing. A handle interrupted or closed first has no
row any more; one re-suspended on a new request has its row moved to the new deadline.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import math
from collections.abc import Callable
from typing import Protocol

from ...clock import Clock, parse_rfc3339
from ...errors import DataLoss, FailedPrecondition, NotFound, StoreError
from ...model import Answer, Event, EventType, HandleState
from ...store.base import Store
from ..state.handle import Handle
from .rule import EXPIRED, due

log = logging.getLogger("toolnexus_daemon.engine")

# due rows resolved per store read; more due ones are read right after
BATCH = 64
# the longest sleep: a wall clock that jumps (NTP, a suspended VM) is looked at again this often
MAX_SLEEP_S = 30.0
# a store that could not be read (a database outage) is asked again after this long
RETRY_S = 1.0


class Expirable(Protocol):
    """What the scheduler needs of a runtime (``Runtime`` satisfies it)."""

    @property
    def id(self) -> str: ...
    def snapshot(self, handle_id: str) -> Handle: ...
    async def resume(self, answer: Answer, handle_id: str = "", no_wait: bool = False) -> object: ...


class Deadlines:
    """The daemon's deadline scheduler; ``runtime_of`` names the runtimes it serves now."""

    def __init__(self, store: Store, clock: Clock, runtime_of: Callable[[str], Expirable | None]) -> None:
        self._store, self._clock, self._runtime_of = store, clock, runtime_of
        self._next: dict[str, float] = {}  # runtime id -> the soonest deadline known
        self._heap: list[tuple[float, str]] = []  # (deadline, runtime id); stale entries are skipped
        # rows whose decline was refused for good (the agent left the registry): not tried again
        # until the runtime is tracked anew (a reattach may bring the agent back)
        self._stuck: dict[str, set[tuple[str, float]]] = {}
        self._wake: asyncio.Future[None] | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopped = False
        self.fired = 0  # suspensions this daemon declined as expired

    # ------------------------------------------------------------------ what to watch

    def track(self, runtime_id: str) -> None:
        """A runtime loaded, taken over or reattached here: looked at now, on the deadlines' task
        (``_expire`` reads its expiry index through ``Store.read`` and plans its next deadline), so
        the New or the start that tracks it reads nothing on the event loop."""
        self._stuck.pop(runtime_id, None)
        self._next.pop(runtime_id, None)
        self.at(runtime_id, self._clock.now())

    def forget(self, runtime_id: str) -> None:
        """The runtime is no longer served here (lost to another daemon, purged)."""
        self._next.pop(runtime_id, None)
        self._stuck.pop(runtime_id, None)

    def saw(self, runtime_id: str, events: list[Event]) -> None:
        """Committed events of a runtime: a ``pending`` with an ``expires_at`` may be sooner."""
        for e in events:
            if e.type is EventType.PENDING and e.pending is not None and e.pending.expires_at:
                when = parse_rfc3339(e.pending.expires_at)
                if when is not None:
                    self.at(runtime_id, when)

    def at(self, runtime_id: str, when: float) -> None:
        """Look at ``runtime_id`` again at ``when`` (if nothing sooner is planned for it)."""
        if self._stopped or not math.isfinite(when) or when >= self._next.get(runtime_id, math.inf):
            return
        self._next[runtime_id] = when
        heapq.heappush(self._heap, (when, runtime_id))
        self._poke()

    # ------------------------------------------------------------------ the loop

    async def stop(self) -> None:
        self._stopped = True
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    def _poke(self) -> None:
        """Wake the loop to look at the heap again (starting it on first use)."""
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name="deadlines")
        if self._wake is not None and not self._wake.done():
            self._wake.set_result(None)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while not self._stopped:
            await self._fire_due()
            self._wake = loop.create_future()
            delay = MAX_SLEEP_S
            if self._heap:
                delay = min(MAX_SLEEP_S, max(0.0, self._heap[0][0] - self._clock.now()))
            await self._clock.wait_done(self._wake, delay)

    async def _fire_due(self) -> None:
        while self._heap and due(self._heap[0][0], self._clock.now()):
            when, rid = heapq.heappop(self._heap)
            if self._next.get(rid) != when:
                continue  # superseded by a sooner deadline, or forgotten
            del self._next[rid]
            try:
                await self._expire(rid)
            except StoreError as exc:  # the store is away: the runtime is looked at again shortly
                log.warning("deadlines not checked", extra={"runtime": rid, "error": str(exc)})
                self.at(rid, self._clock.now() + RETRY_S)
            except Exception:  # a bug must not stop the deadlines of every other runtime
                log.exception("deadlines of a runtime failed", extra={"runtime": rid})
                self.at(rid, self._clock.now() + RETRY_S)

    async def _expire(self, rid: str) -> None:
        """Decline every due suspension of ``rid``, then plan its next deadline."""
        rt = self._runtime_of(rid)
        if rt is None:
            return
        stuck = self._stuck.setdefault(rid, set())
        limit = len(stuck) + BATCH
        rows = await self._store.read(lambda s: s.expiring(rid, limit))
        stuck &= {(hid, when) for when, hid in rows}  # rows gone from the index need no memory
        for when, hid in rows:
            if not due(when, self._clock.now()):
                self.at(rid, when)
                return
            if (hid, when) not in stuck:
                await self._decline(rt, hid, when, stuck)
        if len(rows) == limit:
            self.at(rid, self._clock.now())  # more were due than one read holds
        elif not stuck:
            self._stuck.pop(rid, None)

    async def _decline(self, rt: Expirable, hid: str, when: float, stuck: set[tuple[str, float]]) -> None:
        """Resume the leaf ``hid`` with the expiry decline. A row that is still there after a try
        that did not land (a race lost to an answer leaves none) is not tried again."""
        stuck.add((hid, when))
        request_id = _waits_on(rt, hid)
        if request_id is None:
            return
        try:
            await rt.resume(Answer(request_id, ok=False, reason=EXPIRED), handle_id=hid, no_wait=True)
        except (FailedPrecondition, NotFound, DataLoss) as exc:
            if _waits_on(rt, hid) == request_id:  # not a race lost to an answer: refused for good
                log.warning("an expired suspension could not be declined", extra={
                    "runtime": rt.id, "handle": hid, "request_id": request_id, "error": str(exc)})
            return
        stuck.discard((hid, when))  # a new suspension of the handle may reuse the deadline
        self.fired += 1
        log.info("suspension expired", extra={"runtime": rt.id, "handle": hid, "request_id": request_id})


def _waits_on(rt: Expirable, hid: str) -> str | None:
    """The request ``hid`` is durably suspended on, or None (answered, closed, gone)."""
    try:
        h = rt.snapshot(hid)
    except (NotFound, DataLoss):
        return None
    if h.state is not HandleState.SUSPENDED or h.pending is None or h.escalating:
        return None
    return h.pending.id
