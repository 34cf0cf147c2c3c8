"""Runtime leases and fenced commits on a real PostgreSQL (the store half of a cluster).

Two nodes share one database, each with its own store and its own ``Leases``. The tests drive
expiry with short leases and the database's own clock, as the cluster does.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import psycopg
import pytest

from toolnexus_daemon.errors import LeaseLost, NodeTaken
from toolnexus_daemon.store import Batch
from toolnexus_daemon.store.postgres.lease import Held, Lease, Leases
from toolnexus_daemon.store.postgres.schema import MIGRATIONS
from toolnexus_daemon.store.postgres.store import PgStore

from .samples import event
from .test_pg import sql

LEASE_MS = 300


class Member:
    def __init__(self, dsn: str, node: str, lease_ms: int = LEASE_MS) -> None:
        self.store = PgStore(dsn)
        self.leases = Leases(self.store.link, node, f"{node}.local:7000", lease_ms)

    def close(self) -> None:
        self.leases.close()
        self.store.close()


@pytest.fixture
def pair(pg_dsn: str) -> Iterator[tuple[Member, Member]]:
    a, b = Member(pg_dsn, "node-a"), Member(pg_dsn, "node-b")
    yield a, b
    a.close()
    b.close()


def _expire(member: Member, runtime_id: str) -> None:
    """Wait (bounded) until the database says the lease of ``runtime_id`` has run out."""
    deadline = time.monotonic() + 5
    query = b"SELECT expires_at <= now() FROM tn_leases WHERE rid = %s"
    with psycopg.connect(member.store.link.dsn, autocommit=True) as conn:
        while not conn.execute(query, (runtime_id,)).fetchone()[0]:  # type: ignore[index]
            assert time.monotonic() < deadline
            time.sleep(0.05)


def test_one_owner_at_a_time_and_the_other_learns_where_it_is(pair: tuple[Member, Member]) -> None:
    a, b = pair
    first = a.leases.acquire("rt-1")
    assert isinstance(first, Lease) and first.epoch == 1 and 0 < first.remaining_ms <= LEASE_MS
    other = b.leases.acquire("rt-1")
    assert isinstance(other, Held) and (other.owner, other.address) == ("node-a", "node-a.local:7000")
    again = a.leases.acquire("rt-1")  # the owner asking again renews, same epoch
    assert isinstance(again, Lease) and again.epoch == 1


async def test_a_commit_fenced_by_a_lost_lease_lands_nothing(pair: tuple[Member, Member]) -> None:
    """node-a stalls past its lease, node-b takes over and commits; node-a's next commit is refused
    whole and the data is node-b's."""
    a, b = pair
    lease_a = a.leases.acquire("rt-2")
    assert isinstance(lease_a, Lease)
    await a.store.commit(Batch(runtimes={"rt-2": {"by": "a"}}, events=[event("rt-2", 1)],
                               fences=[lease_a.fence]))
    _expire(a, "rt-2")
    lease_b = b.leases.acquire("rt-2")
    assert isinstance(lease_b, Lease) and lease_b.epoch == lease_a.epoch + 1
    await b.store.commit(Batch(runtimes={"rt-2": {"by": "b"}}, events=[event("rt-2", 2)],
                               fences=[lease_b.fence]))

    with pytest.raises(LeaseLost, match="no longer held by node-a.*another daemon owns the runtime now"):
        await a.store.commit(Batch(runtimes={"rt-2": {"by": "a-late"}}, events=[event("rt-2", 3)],
                                   fences=[lease_a.fence]))
    assert LeaseLost.code == "UNAVAILABLE"
    assert b.store.get_runtime("rt-2") == {"by": "b"} and b.store.last_seq("rt-2") == 2
    assert a.leases.renew({"rt-2": lease_a.epoch}) == {"rt-2"}  # the renewal says so too
    assert b.leases.renew({"rt-2": lease_b.epoch}) == set()


async def test_a_fenced_commit_queued_with_others_fails_alone(pair: tuple[Member, Member]) -> None:
    a, b = pair
    stale = a.leases.acquire("rt-3")
    assert isinstance(stale, Lease)
    _expire(a, "rt-3")
    assert isinstance(b.leases.acquire("rt-3"), Lease)
    mine = a.leases.acquire("rt-4")
    assert isinstance(mine, Lease)
    results = await asyncio.gather(
        *(a.store.commit(Batch(runtimes={"rt-4": {"i": i}}, fences=[mine.fence])) for i in range(5)),
        a.store.commit(Batch(runtimes={"rt-3": {"late": True}}, fences=[stale.fence])),
        return_exceptions=True)
    assert [type(r).__name__ for r in results] == ["NoneType"] * 5 + ["LeaseLost"]
    assert a.store.get_runtime("rt-4") == {"i": 4} and a.store.get_runtime("rt-3") is None


def test_release_hands_over_at_once_and_the_epoch_only_grows(pair: tuple[Member, Member]) -> None:
    a, b = pair
    lease = a.leases.acquire("rt-5")
    assert isinstance(lease, Lease)
    assert a.leases.release(lease) and not a.leases.release(lease)  # the second release finds it gone
    taken = b.leases.acquire("rt-5")  # no waiting for expiry
    assert isinstance(taken, Lease) and taken.epoch == lease.epoch + 1
    assert b.leases.release(taken)
    back = a.leases.acquire("rt-5")
    assert isinstance(back, Lease) and back.epoch == taken.epoch + 1


async def test_orphans_and_live_nodes(pair: tuple[Member, Member], pg_dsn: str) -> None:
    """Runtimes nobody owns (never leased, or expired) are the sweeper's; live nodes list what they own."""
    a, b = pair
    await a.store.commit(Batch(runtimes={"rt-6": {}, "rt-7": {}, "rt-8": {}}))
    assert isinstance(a.leases.acquire("rt-6"), Lease)
    assert isinstance(b.leases.acquire("rt-7"), Lease)
    assert a.leases.orphans() == ["rt-8"]
    a.leases.renew({})
    b.leases.renew({})
    seen = time.monotonic()
    nodes = {n.node: n for n in a.leases.live_nodes()}
    assert nodes["node-a"].runtimes == ("rt-6",) and nodes["node-b"].runtimes == ("rt-7",)
    assert nodes["node-b"].address == "node-b.local:7000"
    _expire(a, "rt-6")
    _expire(a, "rt-7")
    assert set(a.leases.orphans()) == {"rt-6", "rt-7", "rt-8"}
    time.sleep(max(0.0, seen + 2 * LEASE_MS / 1000 - time.monotonic()))  # past one lease since seen
    assert a.leases.live_nodes() == []  # nobody renewed within a lease


def test_two_processes_under_one_node_id_never_both_own_a_runtime(pair: tuple[Member, Member]) -> None:
    """Before: the lease and its fence named the node only, so a second process started under the same
    node id renewed the first one's lease at the same epoch and both committed as its owner."""
    a, _ = pair
    twin = Leases(a.store.link, "node-a", "twin.local:7000", LEASE_MS)
    assert twin.incarnation != a.leases.incarnation
    first = a.leases.acquire("rt-twin")
    assert isinstance(first, Lease)
    other = twin.acquire("rt-twin")
    assert isinstance(other, Held) and other.owner == "node-a"
    with pytest.raises(LeaseLost):  # the twin's commit under the first one's epoch is refused
        asyncio.run(a.store.commit(Batch(runtimes={"rt-twin": {}}, fences=[
            Lease("rt-twin", "node-a", first.epoch, 0.0, twin.incarnation).fence])))
    assert a.leases.renew({"rt-twin": first.epoch}) == set()
    assert twin.renew({"rt-twin": first.epoch}) == {"rt-twin"}


def test_a_live_node_id_is_refused_to_a_second_process_and_freed_by_leave(
        pair: tuple[Member, Member]) -> None:
    a, _ = pair
    a.leases.join()
    twin = Leases(a.store.link, "node-a", "twin.local:7000", LEASE_MS)
    stop = time.monotonic() + 3 * LEASE_MS / 1000

    def keep_renewing() -> None:
        while time.monotonic() < stop:
            a.leases.renew({})
            time.sleep(LEASE_MS / 4000)

    import threading
    renewer = threading.Thread(target=keep_renewing)
    renewer.start()
    try:
        with pytest.raises(NodeTaken, match='node id "node-a" is in use by another live toolnexus-daemon at '
                                            "node-a.local:7000 .*--node-id"):
            twin.join()
    finally:
        renewer.join()
    a.leases.leave()
    twin.join(wait=False)  # a node id left by a graceful stop is free at once


def test_a_silent_node_row_is_taken_after_one_lease(pair: tuple[Member, Member]) -> None:
    """A predecessor killed under the same node id stops renewing: its restart waits one lease, then joins."""
    a, _ = pair
    a.leases.join()
    started = time.monotonic()
    Leases(a.store.link, "node-a", "again.local:7000", LEASE_MS).join()
    assert time.monotonic() - started < 3 * LEASE_MS / 1000


def test_the_node_row_of_a_process_gone_from_this_host_is_taken_at_once(pg_dsn: str) -> None:
    """The row names its process; a process of this host that no longer runs holds nothing."""
    import subprocess
    import sys

    a = Member(pg_dsn, "node-a", lease_ms=60_000)  # a lease far longer than the test
    try:
        a.leases.join()
        dead = subprocess.Popen([sys.executable, "-c", "pass"])  # a process of this host, ended
        dead.wait()
        assert a.leases.process, "this host's processes can be told (Linux /proc)"
        scope = a.leases.process.rsplit("|", 2)[0]
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(b"UPDATE tn_nodes SET process = %s WHERE node = 'node-a'",
                         (f"{scope}|{dead.pid}|1",))
        started = time.monotonic()
        Leases(a.store.link, "node-a", "again.local:7000", 60_000).join()
        assert time.monotonic() - started < 5  # not the 60 s the row's renewals would be waited for
    finally:
        a.close()


def test_a_version_1_database_migrates_forward_keeping_its_rows(pg_dsn: str) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        for statement in MIGRATIONS[0]:
            conn.execute(statement.encode())
        conn.execute(b"INSERT INTO tn_meta (key, value) VALUES ('schema', '1')")
        conn.execute(b"INSERT INTO tn_runtimes (rid, value) VALUES ('old', '\\x00')")
    store = PgStore(pg_dsn)
    try:
        assert store.runtime_ids() == ["old"]
        leases = Leases(store.link, "node-a", "a:1", LEASE_MS)
        assert isinstance(leases.acquire("old"), Lease)
        leases.close()
    finally:
        store.close()


def test_a_version_4_database_migrates_to_leases_held_by_a_process(pg_dsn: str) -> None:
    """Schema 5 adds the incarnation to leases and nodes: a lease written by an older daemon (no
    incarnation) is nobody's process once it expires, and an unexpired one is still its holder's."""
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        for step in MIGRATIONS[:4]:
            for statement in step:
                conn.execute(statement.encode())
        conn.execute(b"INSERT INTO tn_meta (key, value) VALUES ('schema', '4')")
        conn.execute(b"INSERT INTO tn_leases VALUES ('live', 'old', 'old:1', 3, now() + interval '1 hour'), "
                     b"('gone', 'old', 'old:1', 5, now() - interval '1 second')")
    store = PgStore(pg_dsn)
    try:
        assert sql(pg_dsn, "SELECT value FROM tn_meta WHERE key = 'schema'") == [(str(len(MIGRATIONS)),)]
        leases = Leases(store.link, "old", "new:1", LEASE_MS)  # even under the old node id
        held = leases.acquire("live")
        assert isinstance(held, Held) and held.owner == "old"
        taken = leases.acquire("gone")
        assert isinstance(taken, Lease) and taken.epoch == 6
        leases.close()
    finally:
        store.close()
