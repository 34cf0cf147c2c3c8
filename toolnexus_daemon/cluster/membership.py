"""This daemon's place in the cluster: the runtime leases it holds, kept alive, trusted only while fresh.

Every third of a lease the loop renews every lease held (one statement) and marks the node
seen; a lease the renewal finds lost is reported to the engine, which forgets the runtime.
Then it looks for runtimes without a live owner — a daemon died, was partitioned or stopped
renewing — and asks the engine to take them over, so a turn that was running on a dead
daemon continues within about one lease without waiting for a call to name its runtime.

**The owner fences itself.** The database's clock decides when a lease expires for the other
daemons; this process cannot ask it while it is cut off, paused or slow. So it keeps its own
account on its monotonic clock: a lease is *fresh* until ``lease - margin`` after the moment
its last committed renewal (or its acquisition) was *sent* — the database set the expiry
later than that, so the window closes before the lease can lapse there. A runtime whose lease
is no longer fresh is given up here at once (the engine forgets it: its streams and waits end
UNAVAILABLE, its turns stop, nothing more is read, called or committed for it); if nobody took
it over meanwhile, the next call or sweep takes it back at a new epoch, recovered from the store.

Database calls run on one worker thread of their own, one at a time, each bounded by a timeout
well under the lease: psycopg here is synchronous, a hung database must not hold the event loop,
and a statement the database never answers must not pile up threads. While one is stuck, the
next fails at once (``StoreUnavailable``) instead of queueing behind it.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FuturesTimeout
from typing import Any, TypeVar

from ..engine.commit.ownership import Claim, Elsewhere, Owned
from ..errors import StoreError, StoreUnavailable
from ..store.base import Fence
from ..store.postgres.lease import LEASE_STATEMENT_SHARE, Lease, Leases

log = logging.getLogger("toolnexus_daemon.cluster")

SWEEP_LIMIT = 100
ELSEWHERE_CACHE = 10_000  # runtimes taken over per round at most: a dead node's load spreads over rounds
# the part of a lease an owner keeps in hand: it stops acting this long before the database could let
# another daemon take the runtime (covers clock-rate differences and a check made just before acting)
MARGIN_SHARE = 0.2
MIN_MARGIN_MS = 50

LostHandler = Callable[[str], None]
Adopter = Callable[[str], Awaitable[bool]]
T = TypeVar("T")


class Membership:
    """The ``engine.ownership.Ownership`` of one daemon process, over ``Leases``."""

    def __init__(self, leases: Leases) -> None:
        self._leases = leases
        self._held: dict[str, Lease] = {}
        # runtime id -> loop time (monotonic) until which its lease is fresh here
        self._fresh_until: dict[str, float] = {}
        self.margin_ms = max(MIN_MARGIN_MS, int(leases.lease_ms * MARGIN_SHARE))
        # where runtimes owned elsewhere live, remembered until their lease could lapse (at most a
        # third of a lease): a forwarded call then costs no database round trip to find the owner
        self._elsewhere: dict[str, tuple[Elsewhere, float]] = {}
        self._task: asyncio.Task[None] | None = None
        self._lapse: asyncio.TimerHandle | None = None
        self._stopping = False
        self._lost: LostHandler = lambda runtime_id: None
        self._lapsed: LostHandler = lambda runtime_id: None
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pg-lease")
        self._gate = asyncio.Lock()
        self._inflight: asyncio.Future[Any] | None = None
        self._inflight_since = 0.0
        self.takeovers = 0
        self.renew_seconds = 0.0
        # runtimes given up because their lease could not be renewed in time (metrics, tests)
        self.lapsed = 0

    @property
    def node(self) -> str:
        return self._leases.node

    @property
    def incarnation(self) -> str:
        return self._leases.incarnation

    @property
    def address(self) -> str:
        return self._leases.address

    def set_address(self, address: str) -> None:
        """Where other daemons reach this one ("" = nowhere), once the listeners are bound."""
        self._leases.address = address

    @property
    def lease_ms(self) -> int:
        return self._leases.lease_ms

    # ------------------------------------------------------------------ the database, bounded

    async def _db(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on the lease thread, within the statement timeout; ``StoreUnavailable`` when
        the database does not answer in time or is still silent on an earlier statement."""
        loop = asyncio.get_running_loop()
        timeout_s = self._leases.lease_ms * LEASE_STATEMENT_SHARE / 1000
        try:
            async with asyncio.timeout(timeout_s):
                async with self._gate:
                    stuck = self._inflight
                    if stuck is not None and not stuck.done():
                        raise self._silent(loop.time() - self._inflight_since)
                    call = loop.run_in_executor(self._pool, functools.partial(fn, *args))
                    call.add_done_callback(_retrieve)
                    self._inflight, self._inflight_since = call, loop.time()
                    return await asyncio.shield(call)
        except TimeoutError:
            raise self._silent(timeout_s) from None

    def _silent(self, for_s: float) -> StoreUnavailable:
        return StoreUnavailable(f"the {self._leases.link.name} has not answered this daemon's lease "
                                f"statements for {for_s:.1f} s; retry shortly (once the runtime's lease "
                                "lapses another daemon of the cluster takes it over)")

    # ------------------------------------------------------------------ ownership

    async def join(self) -> None:
        """Claim this node id for this process (``NodeTaken`` when another live process has it)."""
        await asyncio.to_thread(self._leases.join)

    async def claim(self, runtime_id: str) -> Claim:
        loop = asyncio.get_running_loop()
        known = self._elsewhere.get(runtime_id)
        if known is not None and loop.time() < known[1]:
            return known[0]
        began = loop.time()
        got = await self._db(self._leases.acquire, runtime_id, runtime_id not in self._held)
        if isinstance(got, Lease):
            if got.epoch > 1 and runtime_id not in self._held:  # another daemon held it before
                self.takeovers += 1
            self._held[runtime_id] = got
            self._fresh(runtime_id, began)
            self._elsewhere.pop(runtime_id, None)
            return Owned(got.fence)
        where = Elsewhere(got.owner, got.address, time.monotonic() + got.remaining_ms / 1000)
        ttl_s = min(got.remaining_ms, self._leases.lease_ms / 3) / 1000
        if len(self._elsewhere) >= ELSEWHERE_CACHE:
            self._elsewhere.clear()  # bounded: a cold cache costs one query per runtime, nothing more
        self._elsewhere[runtime_id] = (where, loop.time() + ttl_s)
        return where

    def fresh(self, fence: Fence) -> bool:
        """Whether this process may still act for ``fence``'s tenure: it holds that lease and renewed
        it within ``lease - margin`` (its own monotonic clock, from when the renewal was sent)."""
        lease = self._held.get(fence.runtime_id)
        if lease is None or lease.epoch != fence.epoch or lease.incarnation != fence.incarnation:
            return False
        return asyncio.get_running_loop().time() < self._fresh_until.get(fence.runtime_id, 0.0)

    def give_up(self, runtime_id: str) -> None:
        """Stop holding ``runtime_id`` here (its lease went stale): no more renewals for it."""
        self._held.pop(runtime_id, None)
        self._fresh_until.pop(runtime_id, None)

    def forget(self, runtime_id: str) -> None:
        """The owner we forwarded to did not answer: ask the database next time."""
        self._elsewhere.pop(runtime_id, None)

    async def release(self, runtime_id: str) -> None:
        lease = self._held.pop(runtime_id, None)
        self._fresh_until.pop(runtime_id, None)
        if lease is not None:
            await self._db(self._leases.release, lease)
            log.info("runtime lease released", extra={"runtime": runtime_id, "epoch": lease.epoch})

    def held(self) -> set[str]:
        return set(self._held)

    def live_nodes(self) -> list[tuple[str, str, tuple[str, ...]]]:
        """(node, address, runtimes owned) of every node seen within one lease (blocking: a query on the
        lease thread, given up after the statement timeout so a hung database cannot hold ``Info``)."""
        timeout_s = self._leases.lease_ms * LEASE_STATEMENT_SHARE / 1000
        try:
            nodes = self._pool.submit(self._leases.live_nodes).result(timeout_s)
        except FuturesTimeout:
            raise self._silent(timeout_s) from None
        return [(n.node, n.address, n.runtimes) for n in nodes]

    # ------------------------------------------------------------------ freshness on our own clock

    def _fresh(self, runtime_id: str, sent_at: float, arm: bool = True) -> None:
        until = sent_at + (self._leases.lease_ms - self.margin_ms) / 1000
        self._fresh_until[runtime_id] = max(until, self._fresh_until.get(runtime_id, 0.0))
        if arm:
            self._arm()

    def _arm(self) -> None:
        """Wake up when the first held lease goes stale (not once stopping)."""
        if self._lapse is not None:
            self._lapse.cancel()
            self._lapse = None
        if self._fresh_until and not self._stopping:
            self._lapse = asyncio.get_running_loop().call_at(min(self._fresh_until.values()), self._stale)

    def _stale(self) -> None:
        """Every lease past its fresh window is given up here, and the engine forgets its runtime."""
        self._lapse = None
        now = asyncio.get_running_loop().time()
        for rid, until in list(self._fresh_until.items()):
            if until <= now:
                self.give_up(rid)
                self.lapsed += 1
                log.warning("runtime lease not renewed in time; this daemon stops serving the runtime",
                            extra={"runtime": rid, "lease_ms": self._leases.lease_ms,
                                   "margin_ms": self.margin_ms})
                self._lapsed(rid)
        self._arm()

    # ------------------------------------------------------------------ the loop

    def start(self, lost: LostHandler, adopt: Adopter, lapsed: LostHandler | None = None) -> None:
        """Renew and sweep in the background; ``lapsed`` hears of a lease given up here because it went
        stale (default: ``lost``)."""
        self._lost = lost
        self._lapsed = lapsed or lost
        self._task = asyncio.get_running_loop().create_task(self._run(lost, adopt), name="cluster-membership")

    async def stop(self) -> None:
        """No more renewals or sweeps (a stopping daemon); the checks made before acting still hold."""
        self._stopping = True
        if self._lapse is not None:
            self._lapse.cancel()
            self._lapse = None
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def leave(self) -> None:
        """At the end of a graceful stop: the node id is free for the next start at once."""
        try:
            await self._db(self._leases.leave)
        except StoreError as exc:  # the row goes silent by itself; a restart waits one lease
            log.warning("node row not released", extra={"error": str(exc)})
        self._pool.shutdown(wait=False)

    async def _run(self, lost: LostHandler, adopt: Adopter) -> None:
        period = self._leases.lease_ms / 3000
        while True:
            try:
                await self.tick(lost, adopt)
            except StoreError as exc:  # the database is away: leases run on; retried next round
                log.warning("lease renewal failed", extra={"error": str(exc)})
            await asyncio.sleep(period)

    async def tick(self, lost: LostHandler, adopt: Adopter) -> None:
        """One round: renew what is held, report what is lost, take over runtimes nobody owns."""
        self._lost = lost
        loop = asyncio.get_running_loop()
        began = loop.time()
        held = {rid: lease.epoch for rid, lease in self._held.items()}
        gone = await self._db(self._leases.renew, held)
        self.renew_seconds = loop.time() - began
        for rid, epoch in held.items():
            current = self._held.get(rid)
            if current is None or current.epoch != epoch:
                continue  # given up, or taken again at a newer epoch while the renewal ran: not this tenure
            if rid in gone:
                self.give_up(rid)
                log.warning("runtime lease lost", extra={"runtime": rid})
                lost(rid)
            else:
                self._fresh(rid, began, arm=False)
        self._arm()  # once for the whole round: the timer follows the stalest lease
        for rid in await self._db(self._leases.orphans, SWEEP_LIMIT):
            if rid not in self._held and await adopt(rid):
                log.warning("runtime taken over from a daemon that stopped renewing", extra={"runtime": rid})
        for rid in await self._db(self._leases.dead_holders, SWEEP_LIMIT):
            if rid not in self._held and await adopt(rid):
                log.warning("runtime taken over at once from a daemon process of this host that is gone",
                            extra={"runtime": rid})


def _retrieve(future: asyncio.Future[Any]) -> None:
    """A statement whose caller gave up still ends; its error is not an unretrieved one."""
    if not future.cancelled():
        future.exception()
