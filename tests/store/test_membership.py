"""The membership's renewal round (``cluster/membership.py``): a lease the renewal finds lost is
reported to the engine — unless this daemon took the runtime again at a newer epoch while the
renewal ran, which is a tenure the renewal never asked about."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from toolnexus_daemon.cluster.membership import Membership
from toolnexus_daemon.store.pg_lease import Lease, Leases


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
