"""The membership's renewal round (``cluster/membership.py``): a lease the renewal finds lost is
reported to the engine — unless this daemon took the runtime again at a newer epoch while the
renewal ran, which is a tenure the renewal never asked about."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping
from typing import Any, cast

import pytest

from toolnexus_daemon.cluster.membership import Membership
from toolnexus_daemon.errors import StoreUnavailable
from toolnexus_daemon.store.postgres.lease import Lease, Leases


class RacingLeases:
    """Leases whose renewal says every lease it was asked about is gone, and runs ``meanwhile``
    while it is in flight (a claim of the same runtime on the event loop, as it happens live)."""

    node, address, lease_ms = "node-a", "node-a.local:7000", 300

    def __init__(self) -> None:
        self.meanwhile = lambda: None

    def renew(self, held: Mapping[str, int]) -> set[str]:
        self.meanwhile()
        return set(held)

    def orphans(self, limit: int) -> list[str]:
        return []

    def dead_holders(self, limit: int) -> list[str]:
        return []


async def _tick(leases: RacingLeases, membership: Membership) -> list[str]:
    lost: list[str] = []

    async def adopt(rid: str) -> bool:
        return False

    await membership.tick(lost.append, adopt)
    return lost


async def test_a_lost_lease_is_reported_and_dropped() -> None:
    leases = RacingLeases()
    membership = Membership(cast(Leases, leases))
    membership._held["rt"] = Lease("rt", "node-a", 1, 300.0)
    assert await _tick(leases, membership) == ["rt"]
    assert membership.held() == set()


async def test_a_runtime_taken_again_while_the_renewal_ran_is_not_reported_lost() -> None:
    leases = RacingLeases()
    membership = Membership(cast(Leases, leases))
    held: dict[str, Any] = membership._held
    held["rt"] = Lease("rt", "node-a", 1, 300.0)

    def claimed_again() -> None:
        held["rt"] = Lease("rt", "node-a", 3, 300.0)

    leases.meanwhile = claimed_again
    assert await _tick(leases, membership) == []
    assert membership.held() == {"rt"} and held["rt"].epoch == 3


class HungLeases(RacingLeases):
    """Leases whose database stops answering once ``hang`` is set: a statement then blocks (a thread
    of the membership waits on it) until ``release`` is set."""

    link = type("L", (), {"name": "PostgreSQL database test"})()
    lease_ms = 1000

    def __init__(self) -> None:
        super().__init__()
        self.hang, self.release = threading.Event(), threading.Event()

    def renew(self, held: Mapping[str, int]) -> set[str]:
        if self.hang.is_set():
            self.release.wait(10)
        return set()

    def acquire(self, runtime_id: str, new: bool = False) -> Lease:
        raise AssertionError("not reached: the database is still silent on the renewal")

    def leave(self) -> None:
        return None


async def test_an_owner_whose_renewals_go_unanswered_gives_its_runtime_up_on_its_own_clock() -> None:
    """The database hangs without an error: the owner stops acting at lease - margin after the last
    renewal it sent, without waiting for any answer, and later statements fail fast."""
    leases = HungLeases()
    membership = Membership(cast(Leases, leases))
    lapsed: list[str] = []
    lease = Lease("rt", "node-a", 1, 1000.0, "inc")
    membership._held["rt"] = lease
    loop = asyncio.get_running_loop()
    membership.start(lambda rid: None, _never, lapsed.append)
    try:
        await asyncio.sleep(0.05)  # the first renewal, answered
        assert membership.fresh(lease.fence)
        leases.hang.set()
        renewed_at = loop.time()
        while not lapsed:
            assert loop.time() - renewed_at < 2, "still acting past the lease"
            await asyncio.sleep(0.01)
        took = loop.time() - renewed_at
        assert took <= (1000 - membership.margin_ms) / 1000 + 0.05
        assert lapsed == ["rt"] and not membership.fresh(lease.fence) and membership.held() == set()
        with pytest.raises(StoreUnavailable, match="has not answered this daemon's lease statements"):
            await membership.claim("other")  # fails at once behind the stuck statement
    finally:
        leases.release.set()
        await membership.stop()
        await membership.leave()


async def _never(rid: str) -> bool:
    return False
