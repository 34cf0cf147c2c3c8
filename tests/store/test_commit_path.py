"""The engine's one commit path on every real store (memory, LMDB, PostgreSQL): the changes of
several runtimes share one store transaction, a refusal in a mixed group fails only its change
and leaves every runtime's seqs gapless, events are published in commit order once durable, a
cancelled caller's change still lands, and — on PostgreSQL in a cluster — a lost lease fails
only the changes of the runtime that lost it."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

import psycopg
import pytest

from tests.engine.test_committer import Published
from toolnexus_daemon.clock import SystemClock
from toolnexus_daemon.engine.commit.ownership import Claim, Elsewhere, Owned
from toolnexus_daemon.engine.state.change import Change
from toolnexus_daemon.engine.verbs.engine import Engine
from toolnexus_daemon.engine.verbs.runtime import Runtime
from toolnexus_daemon.errors import LeaseLost, StoreError
from toolnexus_daemon.model import (
    ROOT_ID,
    AgentDef,
    EventType,
    InboxItem,
    LlmConfig,
    LlmStyle,
    RuntimeOptions,
)
from toolnexus_daemon.store import Store
from toolnexus_daemon.store.base import Fence
from toolnexus_daemon.store.postgres.lease import Held, Lease, Leases
from toolnexus_daemon.store.postgres.store import COMMIT_LANES, PgStore


class NoModel:
    """The commit path never calls the model; a forgotten runtime closes it."""

    async def aclose(self) -> None:
        return None


def _engine(store: Store, **kwargs: object) -> Engine:
    return Engine(store, clock=SystemClock(), model_for=lambda llm: NoModel(),  # type: ignore[arg-type,return-value]
                  executors={}, **kwargs)  # type: ignore[arg-type]


async def _runtimes(engine: Engine, *names: str) -> list[Runtime]:
    for name in names:
        await engine.new(name, [AgentDef(name="a")], LlmConfig(style=LlmStyle.WORKER), RuntimeOptions())
    return [engine.runtime(n) for n in names]


@pytest.fixture
async def engine(store: Store) -> AsyncIterator[Engine]:
    started = _engine(store, observer=Published(store))
    yield started
    await started.stop()


def _note(rt: Runtime, text: str) -> Change:
    return Change().event(rt.table.handle(ROOT_ID), EventType.POST, text)


def _store_transactions(store: Store) -> int | None:
    """The store's own count of write transactions (LMDB, PostgreSQL); None for memory."""
    stats = getattr(store, "stats", None)
    return int(stats().transactions) if callable(stats) else None


def _notes(store: Store, rt: Runtime) -> list[str]:
    """``rt``'s stored notes, after checking its seqs run 1, 2, 3... up to its ``last_seq``."""
    events = store.events(rt.id, 0, 100_000)
    assert [e.seq for e in events] == list(range(1, len(events) + 1)), f"{rt.id}: seqs have a gap"
    assert rt.last_seq() == len(events)
    return [e.note for e in events]


async def test_changes_of_several_runtimes_land_in_one_store_transaction(store: Store,
                                                                         engine: Engine) -> None:
    """One transaction per commit lane the runtimes take: each its own while lanes are idle
    (PostgreSQL: four), all in one where there is one lane (LMDB and memory)."""
    rts = await _runtimes(engine, "a", "b", "c")
    lanes = min(len(rts), store.commit_lanes)
    before, store_before = engine.committer.stats(), _store_transactions(store)
    await asyncio.gather(*(rt.commit(_note(rt, f"{rt.id}{i}")) for i in range(5) for rt in rts))
    after = engine.committer.stats()
    assert (after.changes - before.changes, after.transactions - before.transactions) == (15, lanes)
    if store_before is not None:
        assert _store_transactions(store) == store_before + lanes, "the store wrote each lane's group at once"
    for rt in rts:
        assert _notes(store, rt) == [f"{rt.id}{i}" for i in range(5)]


async def test_a_refused_change_in_a_mixed_group_fails_alone_and_every_runtime_stays_gapless(
        store: Store, engine: Engine) -> None:
    """The store refuses the change it cannot encode; the group is retried change by change, its
    neighbours of every runtime land, and the refused change's handle is reloaded from the store."""
    a, b, c = await _runtimes(engine, "a", "b", "c")
    root = b.table.handle(ROOT_ID)
    root.inbox.append(InboxItem(from_="app", channel="", text="never stored"))
    bad = Change().save(root).message(root, 0, {"unencodable": object()}).event(root, EventType.POST, "bad")
    results = await asyncio.gather(a.commit(_note(a, "a1")), b.commit(_note(b, "b1")), b.commit(bad),
                                   c.commit(_note(c, "c1")), b.commit(_note(b, "b2")),
                                   a.commit(_note(a, "a2")), return_exceptions=True)
    assert [i for i, r in enumerate(results) if r is not None] == [2]
    assert isinstance(results[2], StoreError) and "cannot encode record" in str(results[2])
    assert (_notes(store, a), _notes(store, b), _notes(store, c)) == (["a1", "a2"], ["b1", "b2"], ["c1"])
    assert root.inbox == [] and b.table.handle(ROOT_ID) is root, "memory reloaded from the store, in place"
    assert store.messages("b", ROOT_ID) == []
    await b.commit(_note(b, "b3"))
    assert _notes(store, b)[-1] == "b3" and engine.committer.stats().failed == 1


async def test_events_are_published_per_runtime_in_commit_order_once_durable(store: Store) -> None:
    published = Published(store)
    engine = _engine(store, observer=published)
    try:
        rts = await _runtimes(engine, "a", "b")
        await asyncio.gather(*(rt.commit(_note(rt, f"n{i}")) for i in range(10) for rt in rts))
        await asyncio.gather(*(rt.commit(_note(rt, f"m{i}")) for rt in rts for i in range(10)))
        assert not published.not_durable, "an event was published before its transaction committed"
        assert published.seqs == {"a": list(range(1, 21)), "b": list(range(1, 21))}
    finally:
        await engine.stop()


async def test_a_cancelled_caller_cannot_tear_or_drop_its_change(store: Store, engine: Engine) -> None:
    a, b = await _runtimes(engine, "a", "b")
    tasks = [asyncio.create_task(rt.commit(_note(rt, f"{rt.id}{i}"))) for i in range(3) for rt in (a, b)]
    await asyncio.sleep(0)  # every task has queued its change
    for task in tasks[2:4]:  # a1, b1
        task.cancel()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    cancelled = [isinstance(r, asyncio.CancelledError) for r in results]
    assert cancelled == [False, False, True, True, False, False]
    await a.durable()
    await b.durable()
    assert (_notes(store, a), _notes(store, b)) == (["a0", "a1", "a2"], ["b0", "b1", "b2"])


# ------------------------------------------------------------------ PostgreSQL, in a cluster

LEASE_MS = 300


class LeaseOwnership:
    """An ``Ownership`` over the store's leases alone (no renewal, no sweeper): what the engine asks."""

    def __init__(self, leases: Leases) -> None:
        self.leases = leases
        self.held: dict[str, Lease] = {}

    async def claim(self, runtime_id: str) -> Claim:
        got = self.leases.acquire(runtime_id)
        if isinstance(got, Held):
            return Elsewhere(got.owner, got.address)
        self.held[runtime_id] = got
        return Owned(got.fence)

    async def release(self, runtime_id: str) -> None:
        lease = self.held.pop(runtime_id, None)
        if lease is not None:
            self.leases.release(lease)

    def fresh(self, fence: Fence) -> bool:
        """No renewal here: a held lease counts as fresh; the store's fence alone decides."""
        lease = self.held.get(fence.runtime_id)
        return lease is not None and lease.fence == fence

    def give_up(self, runtime_id: str) -> None:
        self.held.pop(runtime_id, None)


def _expire(dsn: str, runtime_id: str) -> None:
    """Wait (bounded) until the database says the lease of ``runtime_id`` has run out."""
    deadline = time.monotonic() + 5
    query = b"SELECT expires_at <= now() FROM tn_leases WHERE rid = %s"
    with psycopg.connect(dsn, autocommit=True) as conn:
        while not conn.execute(query, (runtime_id,)).fetchone()[0]:  # type: ignore[index]
            assert time.monotonic() < deadline
            time.sleep(0.05)


@contextlib.asynccontextmanager
async def _two_nodes(pg_dsn: str, lanes: int = COMMIT_LANES) -> AsyncIterator[tuple[Engine, Leases, PgStore]]:
    """node-a's engine (leases, no renewal; its store with ``lanes`` commit lanes) and node-b's
    leases on one database; all closed after."""
    store_a, store_b = PgStore(pg_dsn, commit_lanes=lanes), PgStore(pg_dsn)
    leases_a = Leases(store_a.link, "node-a", "node-a.local:7000", LEASE_MS)
    leases_b = Leases(store_b.link, "node-b", "node-b.local:7000", LEASE_MS)
    engine = _engine(store_a, ownership=LeaseOwnership(leases_a))
    try:
        yield engine, leases_b, store_a
    finally:
        await engine.stop()
        leases_a.close()
        leases_b.close()
        store_a.close()
        store_b.close()


async def test_a_lost_lease_in_a_mixed_group_fails_only_that_runtimes_changes(pg_dsn: str) -> None:
    """node-a owns two runtimes; node-b takes one over. node-a's next group mixes both: its fences
    fail the transaction whole, the changes are retried one by one, and only those of the runtime
    node-a lost are refused (``LeaseLost``) — which makes the engine forget it. One commit lane:
    with idle lanes the two runtimes would each take their own; a group mixes runtimes when
    every lane is busy, which one lane makes certain."""
    async with _two_nodes(pg_dsn, lanes=1) as (engine, leases_b, store_a):
        kept, lost = await _runtimes(engine, "rt-kept", "rt-lost")
        await asyncio.gather(kept.commit(_note(kept, "k0")), lost.commit(_note(lost, "l0")))
        _expire(pg_dsn, "rt-lost")
        assert isinstance(leases_b.acquire("rt-lost"), Lease), "node-b took rt-lost over"
        before = engine.committer.stats()
        order = [kept, lost, kept, lost, kept]
        commits = (rt.commit(_note(rt, f"{rt.id}-{i}")) for i, rt in enumerate(order))
        results = await asyncio.gather(*commits, return_exceptions=True)
        assert results[0::2] == [None, None, None]
        assert all(isinstance(r, LeaseLost) for r in results[1::2])
        after = engine.committer.stats()
        assert (after.transactions - before.transactions, after.failed - before.failed) == (3, 2)
        assert _notes(store_a, kept) == ["k0", "rt-kept-0", "rt-kept-2", "rt-kept-4"]
        assert [e.note for e in store_a.events("rt-lost")] == ["l0"], "nothing landed after the takeover"
        assert engine.fenced_commits == 2 and not engine.holds("rt-lost") and engine.holds("rt-kept")


async def test_a_refusal_from_an_earlier_tenure_does_not_forget_the_runtime_taken_back(pg_dsn: str) -> None:
    """node-a loses a runtime to node-b (its renewal says so: forgotten) and takes it back at a
    newer epoch once node-b's lease runs out. A commit the old tenure still had on its way is
    then refused — and must not make node-a forget the runtime it serves again, whose lease it
    keeps renewing (no sweeper would ever take it over: the handle would wait forever)."""
    async with _two_nodes(pg_dsn) as (engine, leases_b, store_a):
        (old,) = await _runtimes(engine, "rt-back")
        _expire(pg_dsn, "rt-back")
        assert isinstance(leases_b.acquire("rt-back"), Lease), "node-b took rt-back over"
        engine.lost("rt-back")  # node-a's renewal found the lease gone
        _expire(pg_dsn, "rt-back")
        taken_back = await engine.open("rt-back")
        assert taken_back is not old
        with pytest.raises(LeaseLost):  # the old tenure's commit, still on its way
            await old.commit(_note(old, "from the old tenure"))
        assert engine.holds("rt-back") and engine.runtime("rt-back") is taken_back
        await taken_back.commit(_note(taken_back, "served at the new epoch"))
        assert _notes(store_a, taken_back)[-1] == "served at the new epoch"
        assert engine.fenced_commits == 1
