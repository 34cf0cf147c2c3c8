"""This daemon's place in the cluster: the runtime leases it holds, kept alive and swept.

Every third of a lease the loop renews every lease held (one statement) and marks the node
seen; a lease the renewal finds lost is reported to the engine, which forgets the runtime.
Then it looks for runtimes without a live owner — a daemon died, was partitioned or stopped
renewing — and asks the engine to take them over, so a turn that was running on a dead
daemon continues within about one lease without waiting for a call to name its runtime.

Database calls run in worker threads (``asyncio.to_thread``): psycopg here is synchronous,
and the event loop must keep serving while the database answers.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from ..engine.ownership import Claim, Elsewhere, Owned
from ..errors import StoreError
from ..store.pg_lease import Lease, Leases

log = logging.getLogger("toolnexus_daemon.cluster")

SWEEP_LIMIT = 100
ELSEWHERE_CACHE = 10_000  # runtimes taken over per round at most: a dead node's load spreads over rounds

LostHandler = Callable[[str], None]
Adopter = Callable[[str], Awaitable[bool]]


class Membership:
    """The ``engine.ownership.Ownership`` of one daemon, over ``Leases``."""

    def __init__(self, leases: Leases) -> None:
        self._leases = leases
        self._held: dict[str, Lease] = {}
        # where runtimes owned elsewhere live, remembered until their lease could lapse (at most a
        # third of a lease): a forwarded call then costs no database round trip to find the owner
        self._elsewhere: dict[str, tuple[Elsewhere, float]] = {}
        self._task: asyncio.Task[None] | None = None
        self.takeovers = 0
        self.renew_seconds = 0.0

    @property
    def node(self) -> str:
        return self._leases.node

    @property
    def address(self) -> str:
        return self._leases.address

    def set_address(self, address: str) -> None:
        """Where other daemons reach this one, once the listeners are bound (port 0 resolved)."""
        self._leases.address = address

    @property
    def lease_ms(self) -> int:
        return self._leases.lease_ms

    async def claim(self, runtime_id: str) -> Claim:
        loop = asyncio.get_running_loop()
        known = self._elsewhere.get(runtime_id)
        if known is not None and loop.time() < known[1]:
            return known[0]
        got = await asyncio.to_thread(self._leases.acquire, runtime_id)
        if isinstance(got, Lease):
            if got.epoch > 1 and runtime_id not in self._held:  # another daemon held it before
                self.takeovers += 1
            self._held[runtime_id] = got
            self._elsewhere.pop(runtime_id, None)
            return Owned(got.fence)
        where = Elsewhere(got.owner, got.address)
        ttl_s = min(got.remaining_ms, self._leases.lease_ms / 3) / 1000
        if len(self._elsewhere) >= ELSEWHERE_CACHE:
            self._elsewhere.clear()  # bounded: a cold cache costs one query per runtime, nothing more
        self._elsewhere[runtime_id] = (where, loop.time() + ttl_s)
        return where

    def forget(self, runtime_id: str) -> None:
        """The owner we forwarded to did not answer: ask the database next time."""
        self._elsewhere.pop(runtime_id, None)

    async def release(self, runtime_id: str) -> None:
        lease = self._held.pop(runtime_id, None)
        if lease is not None:
            await asyncio.to_thread(self._leases.release, lease)
            log.info("runtime lease released", extra={"runtime": runtime_id, "epoch": lease.epoch})

    def held(self) -> set[str]:
        return set(self._held)

    def live_nodes(self) -> list[tuple[str, str, tuple[str, ...]]]:
        """(node, address, runtimes owned) of every node seen within one lease (blocking: a query)."""
        return [(n.node, n.address, n.runtimes) for n in self._leases.live_nodes()]

    def start(self, lost: LostHandler, adopt: Adopter) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(lost, adopt), name="cluster-membership")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

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
        loop = asyncio.get_running_loop()
        began = loop.time()
        held = {rid: lease.epoch for rid, lease in self._held.items()}
        gone = await asyncio.to_thread(self._leases.renew, held)
        self.renew_seconds = loop.time() - began
        for rid in gone:
            current = self._held.get(rid)
            if current is not None and current.epoch != held[rid]:
                continue  # taken again at a newer epoch while the renewal ran: that tenure is not lost
            self._held.pop(rid, None)
            log.warning("runtime lease lost", extra={"runtime": rid})
            lost(rid)
        for rid in await asyncio.to_thread(self._leases.orphans, SWEEP_LIMIT):
            if rid not in self._held and await adopt(rid):
                log.warning("runtime taken over from a daemon that stopped renewing", extra={"runtime": rid})
