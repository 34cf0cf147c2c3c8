"""The engine's one commit path: the changes of every runtime grouped into shared transactions,
in order, with gapless seqs per runtime, failing alone, published only once durable.

The same guarantees on the real stores (LMDB, PostgreSQL) are in tests/store/test_commit_path.py."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from toolnexus_daemon.clock import SystemClock
from toolnexus_daemon.engine.commit.committer import MAX_GROUP
from toolnexus_daemon.engine.state.change import Change
from toolnexus_daemon.engine.verbs.engine import Engine
from toolnexus_daemon.engine.verbs.runtime import Runtime
from toolnexus_daemon.errors import StoreError, StoreFull
from toolnexus_daemon.model import (
    JSON,
    ROOT_ID,
    AgentDef,
    Event,
    EventType,
    InboxItem,
    LlmConfig,
    LlmStyle,
    RuntimeOptions,
)
from toolnexus_daemon.store import Batch, MemoryStore, Store
from toolnexus_daemon.store.base import lane_of


class CountingStore(MemoryStore):
    """Records the runtimes of every transaction and refuses any batch carrying a ``poison`` event,
    as a full map would (nothing of it kept)."""

    def __init__(self) -> None:
        super().__init__()
        self.transactions: list[set[str]] = []

    async def commit(self, batch: Batch) -> None:
        if any(e.note == "poison" for e in batch.events):
            raise StoreFull("map full (test)")
        self.transactions.append({e.runtime_id for e in batch.events} | set(batch.purge))
        await super().commit(batch)


class Published:
    """The engine's observer: what each runtime published, and whether it was durable by then."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.seqs: dict[str, list[int]] = {}
        self.not_durable: list[Event] = []

    def __call__(self, rt: Runtime, events: list[Event]) -> None:
        stored = {e.seq for e in self.store.events(rt.id, 0, 100_000)}
        self.not_durable += [e for e in events if e.seq not in stored]
        self.seqs.setdefault(rt.id, []).extend(e.seq for e in events)


async def _engine(store: MemoryStore, *names: str,
                  observer: Published | None = None) -> tuple[Engine, list[Runtime]]:
    engine = Engine(store, clock=SystemClock(), model_for=lambda llm: None,  # type: ignore[arg-type,return-value]
                    executors={}, observer=observer)
    for name in names:
        await engine.new(name, [AgentDef(name="a")], LlmConfig(style=LlmStyle.WORKER), RuntimeOptions())
    return engine, [engine.runtime(n) for n in names]


def _note(rt: Runtime, text: str) -> Change:
    return Change().event(rt.table.handle(ROOT_ID), EventType.POST, text)


def _gapless(store: MemoryStore, rt: Runtime) -> list[str]:
    """The notes of ``rt``'s stored events, after checking their seqs run 1, 2, 3... to ``last_seq``."""
    events = store.events(rt.id, 0, 100_000)
    assert [e.seq for e in events] == list(range(1, len(events) + 1)), f"{rt.id}: seqs have a gap"
    assert rt.last_seq() == len(events)
    return [e.note for e in events]


async def test_concurrent_changes_of_one_runtime_share_transactions_and_keep_their_order() -> None:
    store = CountingStore()
    _, (rt,) = await _engine(store, "c")
    before = len(store.transactions)
    await asyncio.gather(*(rt.commit(_note(rt, f"n{i}")) for i in range(50)))
    assert len(store.transactions) - before < 50, "changes queued behind a commit go down together"
    assert [n for n in _gapless(store, rt) if n.startswith("n")] == [f"n{i}" for i in range(50)]


async def test_changes_of_several_runtimes_share_one_transaction() -> None:
    """One committer for the engine: what three runtimes queue together is one transaction."""
    store = CountingStore()
    engine, rts = await _engine(store, "a", "b", "c")
    before = engine.committer.stats()
    await asyncio.gather(*(rt.commit(_note(rt, f"{rt.id}{i}")) for i in range(4) for rt in rts))
    after = engine.committer.stats()
    assert store.transactions[-1] == {"a", "b", "c"}
    assert (after.changes - before.changes, after.transactions - before.transactions) == (12, 1)
    assert after.largest_group >= 12 and after.queued == 0
    for rt in rts:
        assert _gapless(store, rt)[-4:] == [f"{rt.id}{i}" for i in range(4)]


async def test_a_group_holds_at_most_max_group_changes() -> None:
    store = CountingStore()
    engine, rts = await _engine(store, "a", "b")
    before = engine.committer.stats().transactions
    await asyncio.gather(*(rt.commit(_note(rt, "n")) for _ in range(MAX_GROUP) for rt in rts))
    assert engine.committer.stats().transactions - before == 2
    assert engine.committer.stats().largest_group == MAX_GROUP


async def test_a_refused_change_in_a_mixed_group_fails_alone_and_every_runtime_stays_gapless() -> None:
    store = CountingStore()
    engine, (a, b, c) = await _engine(store, "a", "b", "c")
    results = await asyncio.gather(a.commit(_note(a, "a1")), b.commit(_note(b, "b1")),
                                   b.commit(_note(b, "poison")), c.commit(_note(c, "c1")),
                                   b.commit(_note(b, "b2")), a.commit(_note(a, "a2")), return_exceptions=True)
    assert [type(r).__name__ for r in results] == ["NoneType", "NoneType", "StoreFull", "NoneType",
                                                   "NoneType", "NoneType"]
    assert _gapless(store, a)[-2:] == ["a1", "a2"]
    assert _gapless(store, b)[-2:] == ["b1", "b2"]
    assert _gapless(store, c)[-1:] == ["c1"]
    assert engine.committer.stats().failed == 1
    await b.commit(_note(b, "b3"))  # the next change takes the next seq: no hole where the refusal was
    assert _gapless(store, b)[-1] == "b3"


async def test_a_refused_change_restores_its_handles_from_the_store() -> None:
    store = CountingStore()
    _, (a, b) = await _engine(store, "a", "b")
    root = b.table.handle(ROOT_ID)
    root.inbox.append(InboxItem(from_="app", channel="", text="never stored"))
    results = await asyncio.gather(a.commit(_note(a, "a1")),
                                   b.commit(Change().save(root).event(root, EventType.POST, "poison")),
                                   return_exceptions=True)
    assert results[0] is None and isinstance(results[1], StoreFull)
    assert b.table.handle(ROOT_ID) is root, "whoever holds the handle keeps the one the cache hands out"
    assert root.inbox == [] and store.get_handle("b", ROOT_ID) == root.to_json()


async def test_events_are_published_per_runtime_in_commit_order_and_only_once_durable() -> None:
    store = MemoryStore()
    published = Published(store)
    _, rts = await _engine(store, "a", "b", observer=published)
    for rt in rts:
        published.seqs[rt.id] = []
    await asyncio.gather(*(rt.commit(_note(rt, f"n{i}")) for i in range(20) for rt in rts))
    await asyncio.gather(*(rt.commit(_note(rt, f"m{i}")) for rt in rts for i in range(20)))
    assert not published.not_durable, "an event was published before its transaction committed"
    for rt in rts:
        assert published.seqs[rt.id] == list(range(1, 41)), "in seq order, each once"


async def test_a_cancelled_caller_cannot_tear_or_drop_its_change() -> None:
    store = CountingStore()
    _, (a, b) = await _engine(store, "a", "b")
    tasks = [asyncio.create_task(rt.commit(_note(rt, f"{rt.id}{i}"))) for i in range(3) for rt in (a, b)]
    await asyncio.sleep(0)  # every task has queued its change
    tasks[2].cancel()  # a1
    tasks[3].cancel()  # b1
    results = await asyncio.gather(*tasks, return_exceptions=True)
    cancelled = [isinstance(r, asyncio.CancelledError) for r in results]
    assert cancelled == [False, False, True, True, False, False]
    await a.durable()
    assert _gapless(store, a)[-3:] == ["a0", "a1", "a2"]
    assert _gapless(store, b)[-3:] == ["b0", "b1", "b2"]


async def test_the_barrier_waits_for_every_change_of_its_runtime_queued_so_far() -> None:
    store = CountingStore()
    _, (a, b) = await _engine(store, "a", "b")
    task = asyncio.create_task(a.commit(_note(a, "late")))
    await asyncio.sleep(0)
    assert "late" not in [e.note for e in store.events("a")]
    await a.durable()
    assert store.events("a")[-1].note == "late"
    await b.durable()  # nothing queued for b: returns at once
    await task


async def test_a_truncation_after_an_append_to_its_transcript_starts_a_new_group() -> None:
    """A transaction applies truncations before messages: the truncation must not share a group with
    an earlier append to the same transcript, or the appended message would survive it."""
    store = CountingStore()
    _, (a, b) = await _engine(store, "a", "b")
    root = a.table.handle(ROOT_ID)
    before = len(store.transactions)
    await asyncio.gather(a.commit(_note(a, "x").message(root, 0, {"m": 0}).message(root, 1, {"m": 1})),
                         b.commit(_note(b, "y")),
                         a.commit(_note(a, "cut").message(root, 2, {"m": 2})))
    await asyncio.gather(a.commit(_note(a, "append").message(root, 3, {"m": 3})),
                         b.commit(_note(b, "z")),
                         a.commit(Change(truncate=[(ROOT_ID, 1)]).event(root, EventType.POST, "truncate")),
                         b.commit(_note(b, "w")))
    assert store.messages("a", ROOT_ID) == [{"m": 0}]
    assert len(store.transactions) - before == 3, "the truncation started the third group"
    assert store.transactions[-1] == {"a", "b"}, "later changes of other runtimes still joined it"


async def test_a_purge_after_writes_of_its_runtime_starts_a_new_group_and_removes_them() -> None:
    store = CountingStore()
    engine, (a, b) = await _engine(store, "a", "b")
    await asyncio.gather(a.commit(_note(a, "last words")), b.commit(_note(b, "b1")), a.purge(),
                         b.commit(_note(b, "b2")))
    assert store.get_runtime("a") is None and store.events("a") == []
    assert _gapless(store, b)[-2:] == ["b1", "b2"]
    assert store.transactions[-1] == {"a", "b"}, "the purge and what followed it shared the second group"
    assert engine.committer.stats().queued == 0


async def test_a_store_bug_fails_the_group_without_leaving_a_caller_waiting() -> None:
    class Broken(MemoryStore):
        async def commit(self, batch: Batch) -> None:
            raise RuntimeError("a bug in the store (test)")

    store = Broken()
    engine = Engine(store, clock=SystemClock(), model_for=lambda llm: None,  # type: ignore[arg-type,return-value]
                    executors={})
    with pytest.raises(RuntimeError, match="a bug"):
        await engine.new("a", [AgentDef(name="a")], LlmConfig(style=LlmStyle.WORKER), RuntimeOptions())
    assert engine.committer.stats().failed == 1


async def test_a_failing_observer_costs_no_caller_its_success_and_no_runtime_its_seqs() -> None:
    """Publishing happens after the transaction committed: a bug there is logged, and every caller of
    the group hears success, and the next group numbers on from the seqs that were stored."""
    store = CountingStore()
    published = Published(store)

    def observer(rt: Runtime, events: list[Event]) -> None:
        published(rt, events)
        if rt.id == "a":
            raise RuntimeError("observer bug (test)")

    engine = Engine(store, clock=SystemClock(), model_for=lambda llm: None,  # type: ignore[arg-type,return-value]
                    executors={}, observer=observer)
    for name in ("a", "b"):
        await engine.new(name, [AgentDef(name="a")], LlmConfig(style=LlmStyle.WORKER), RuntimeOptions())
    a, b = engine.runtime("a"), engine.runtime("b")
    for _ in range(2):
        await asyncio.gather(a.commit(_note(a, "a")), b.commit(_note(b, "b")))
    assert (_gapless(store, a), _gapless(store, b)) == (["a", "a"], ["b", "b"])
    assert published.seqs == {"a": [1, 2], "b": [1, 2]} and engine.committer.stats().failed == 0


async def test_a_refusal_whose_reload_fails_does_not_stall_the_changes_behind_it() -> None:
    class Damaged(CountingStore):
        broken = False

        def get_handle(self, runtime_id: str, handle_id: str) -> JSON | None:
            if self.broken and runtime_id == "b":
                raise StoreError("damaged record (test)")
            return super().get_handle(runtime_id, handle_id)

    store = Damaged()
    _, (a, b) = await _engine(store, "a", "b")
    root = b.table.handle(ROOT_ID)
    store.broken = True
    poison = Change().save(root).event(root, EventType.POST, "poison")
    results = await asyncio.wait_for(asyncio.gather(b.commit(poison), a.commit(_note(a, "a1")),
                                                    a.commit(_note(a, "a2")), return_exceptions=True), 5)
    assert isinstance(results[0], StoreFull) and results[1:] == [None, None]
    assert _gapless(store, a) == ["a1", "a2"]


class LaneStore(MemoryStore):
    """A store with four commit lanes whose commits wait for ``open`` (PostgreSQL's writer
    connections, each a round trip away): records the lane of every commit, which lanes are in
    flight, and the order changes landed in."""

    commit_lanes = 4

    def __init__(self) -> None:
        super().__init__()
        self.open = asyncio.Event()
        self.open.set()
        self.in_flight: dict[int, list[str]] = {}
        self.landed: list[tuple[int, str]] = []  # (lane, note) in commit order

    async def commit(self, batch: Batch, lane: int = 0) -> None:
        notes = [e.note for e in batch.events]
        self.in_flight[lane] = notes
        try:
            await self.open.wait()
            await super().commit(batch)
        finally:
            del self.in_flight[lane]
        self.landed += [(lane, note) for note in notes]


def _colliding_names(count: int, lanes: int) -> list[str]:
    """``count`` runtime ids that a hash of the id would put in one lane."""
    names = [f"rt{i}" for i in range(1000)]
    first = lane_of(names[0], lanes)
    return [n for n in names if lane_of(n, lanes) == first][:count]


async def _until(check: Callable[[], bool]) -> None:
    for _ in range(1000):  # bounded: a commit queued a few loop turns ago is in flight by now
        if check():
            return
        await asyncio.sleep(0)
    raise AssertionError("never happened")


async def test_runtimes_take_idle_lanes_whatever_their_ids_hash_to() -> None:
    """Four runtimes whose ids hash to one lane commit on four lanes at once, not one after another."""
    store = LaneStore()
    names = _colliding_names(4, store.commit_lanes)
    _, rts = await _engine(store, *names)
    store.open.clear()
    commits = [asyncio.create_task(rt.commit(_note(rt, rt.id))) for rt in rts]
    await _until(lambda: len(store.in_flight) == 4)
    assert sorted(store.in_flight) == [0, 1, 2, 3], "each runtime's change went to an idle lane"
    store.open.set()
    await asyncio.gather(*commits)
    for rt in rts:
        assert _gapless(store, rt)[-1] == rt.id


async def test_a_runtime_keeps_its_lane_while_a_change_is_unsettled_then_moves_in_order() -> None:
    """While a change of a runtime is in flight its next ones queue behind it in the same lane, even
    with other lanes idle (two lanes may land in either order); once all are durable its next change
    takes an idle lane instead of queueing behind another runtime's commit."""
    store = LaneStore()
    a_name, b_name = _colliding_names(2, store.commit_lanes)
    _, (a, b) = await _engine(store, a_name, b_name)
    store.open.clear()
    first = asyncio.create_task(a.commit(_note(a, "a1")))
    await _until(lambda: len(store.in_flight) == 1)
    (lane_a,) = store.in_flight
    second = asyncio.create_task(a.commit(_note(a, "a2")))  # a1 in flight: a2 must follow it
    await asyncio.sleep(0)
    assert store.in_flight == {lane_a: ["a1"]}, "a2 may not overtake a1 on another lane"
    store.open.set()
    await asyncio.gather(first, second)
    assert [note for _, note in store.landed if note.startswith("a")] == ["a1", "a2"]
    assert {lane for lane, note in store.landed if note in ("a1", "a2")} == {lane_a}

    store.open.clear()
    b_commit = asyncio.create_task(b.commit(_note(b, "b1")))  # b takes a's old lane: it is idle
    await _until(lambda: len(store.in_flight) == 1)
    (lane_b,) = store.in_flight
    moved = asyncio.create_task(a.commit(_note(a, "a3")))  # a settled: an idle lane, not behind b1
    await _until(lambda: len(store.in_flight) == 2)
    assert store.in_flight[lane_b] == ["b1"] and ["a3"] in store.in_flight.values()
    store.open.set()
    await asyncio.gather(b_commit, moved)
    assert _gapless(store, a)[-3:] == ["a1", "a2", "a3"] and _gapless(store, b)[-1] == "b1"


class _NoModel:
    """A model nobody asks (no turn runs); the stop closes it."""

    async def aclose(self) -> None:
        return None


class HeldStore(MemoryStore):
    """Holds a batch carrying a ``held`` event until ``release`` is set (a commit in flight)."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()

    async def commit(self, batch: Batch) -> None:
        if any(e.note == "held" for e in batch.events):
            await self.release.wait()
        await super().commit(batch)


async def test_a_stop_waits_for_the_commits_in_flight() -> None:
    """A commit still in flight when the engine stops (its caller gone) lands before ``stop``
    returns, so the store is not closed under it."""
    store = HeldStore()
    engine = Engine(store, clock=SystemClock(), model_for=lambda llm: _NoModel(),  # type: ignore[arg-type,return-value]
                    executors={})
    await engine.new("s", [AgentDef(name="a")], LlmConfig(style=LlmStyle.WORKER), RuntimeOptions())
    rt = engine.runtime("s")
    caller = asyncio.ensure_future(rt.commit(_note(rt, "held")))
    await asyncio.sleep(0.05)
    caller.cancel()  # the caller goes away; its change is written all the same
    stopping = asyncio.ensure_future(engine.stop())
    await asyncio.sleep(0.2)
    assert not stopping.done(), "the stop returned while a commit was in flight"
    store.release.set()
    await asyncio.wait_for(stopping, 5)
    assert "held" in _gapless(store, rt)
