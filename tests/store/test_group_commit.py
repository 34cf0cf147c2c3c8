"""Group commit in the LMDB store: queued commits share one synced transaction, and still fail alone."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from toolnexus_daemon.errors import StoreFull
from toolnexus_daemon.store import Batch, LmdbStore

from .samples import event
from .writelock import write_lock_held


@pytest.fixture
def store(tmp_path: Path) -> Iterator[LmdbStore]:
    opened = LmdbStore(tmp_path / "data", map_size=1 << 24)
    yield opened
    opened.close()


def small(rid: str, v: int = 1) -> Batch:
    return Batch(runtimes={rid: {"v": v}}, handles={(rid, "root"): {"state": "idle"}}, events=[event(rid, 1)])


SMALL_MAP = 256 * 1024


def too_big_for_the_small_map(rid: str) -> Batch:
    return Batch(runtimes={rid: {}}, messages=[(rid, "root", i, {"content": "x" * 2000}) for i in range(256)])


async def until_drained(store: LmdbStore) -> None:
    """Wait until the writer has taken every queued batch (it is then parked on the write lock)."""
    await asyncio.sleep(0)  # let tasks just created hand their batches over
    deadline = time.monotonic() + 10
    while store.stats().queued:
        assert time.monotonic() < deadline, "the writer never took the queued batches"
        await asyncio.sleep(0.005)


async def test_concurrent_commits_share_transactions(store: LmdbStore) -> None:
    """Fifty commits queued behind one sync land in at most two transactions, every one of them."""
    with write_lock_held(store):
        tasks = [asyncio.create_task(store.commit(small(f"r{i:02d}"))) for i in range(50)]
        await asyncio.sleep(0.05)
        assert not any(t.done() for t in tasks)
    await asyncio.gather(*tasks)

    stats = store.stats()
    assert (stats.batches, stats.failed) == (50, 0)
    assert stats.transactions <= 2
    assert store.runtime_ids() == [f"r{i:02d}" for i in range(50)]


async def test_a_group_applies_its_batches_in_call_order(store: LmdbStore) -> None:
    with write_lock_held(store):
        first = asyncio.create_task(store.commit(small("r0")))
        await until_drained(store)
        tasks = [asyncio.create_task(store.commit(Batch(runtimes={"r1": {"v": i}}))) for i in range(30)]
        await asyncio.sleep(0)
    await asyncio.gather(first, *tasks)

    assert store.get_runtime("r1") == {"v": 29}
    assert store.stats().largest_group == 30


async def test_a_commit_returns_only_once_its_transaction_committed(store: LmdbStore) -> None:
    with write_lock_held(store):
        task = asyncio.create_task(store.commit(small("r1")))
        await asyncio.sleep(0.1)
        assert not task.done()
        assert store.get_runtime("r1") is None
    await task
    assert store.get_runtime("r1") == {"v": 1}


async def test_a_full_batch_in_a_group_fails_alone(tmp_path: Path) -> None:
    """The group's shared transaction overflows; its neighbours land, the big batch gets StoreFull."""
    store = LmdbStore(tmp_path / "data", map_size=SMALL_MAP)
    try:
        with write_lock_held(store):
            blocker = asyncio.create_task(store.commit(small("r0")))
            await until_drained(store)  # the next three are queued together behind it
            before = asyncio.create_task(store.commit(small("r1")))
            big = asyncio.create_task(store.commit(too_big_for_the_small_map("r2")))
            after = asyncio.create_task(store.commit(small("r3", v=3)))
            await asyncio.sleep(0)
        await asyncio.gather(blocker, before, after)
        with pytest.raises(StoreFull, match="--map-size"):
            await big

        assert store.runtime_ids() == ["r0", "r1", "r3"]
        assert store.messages("r2", "root") == [] and store.get_runtime("r3") == {"v": 3}
        stats = store.stats()
        assert (stats.batches, stats.failed, stats.largest_group) == (3, 1, 3)
    finally:
        store.close()


async def test_close_writes_every_queued_commit(tmp_path: Path) -> None:
    store = LmdbStore(tmp_path / "data")
    with write_lock_held(store):
        tasks = [asyncio.create_task(store.commit(small(f"r{i}"))) for i in range(5)]
        await asyncio.sleep(0)
        closing = asyncio.create_task(asyncio.to_thread(store.close))
        await asyncio.sleep(0.05)
        assert not closing.done()
    await asyncio.gather(closing, *tasks)

    reopened = LmdbStore(tmp_path / "data")
    try:
        assert reopened.runtime_ids() == [f"r{i}" for i in range(5)]
    finally:
        reopened.close()


async def test_a_lone_committer_never_waits_for_company(tmp_path: Path) -> None:
    """The group window applies only after a group of several: one commit at a time, one txn each."""
    store = LmdbStore(tmp_path / "data", group_window=0.5)
    try:
        started = time.monotonic()
        for i in range(20):
            await store.commit(small("r1", v=i))
        assert time.monotonic() - started < 5  # 20 windows would take 10 s
        assert store.stats().transactions == 20
    finally:
        store.close()
