"""The LMDB store's writer thread: one transaction per batch, in call order, durable before the
caller hears back, a refused batch failing alone. It does not group: the engine's committer hands
it one batch per group (tests/engine/test_committer.py, tests/store/test_commit_path.py)."""

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


def txn_id(store: LmdbStore) -> int:
    return int(store._env.info()["last_txnid"])  # test-only reach inside: LMDB's own counter


async def until_drained(store: LmdbStore) -> None:
    """Wait until the writer has taken every queued batch (it is then parked on the write lock)."""
    await asyncio.sleep(0)  # let tasks just created hand their batches over
    deadline = time.monotonic() + 10
    while store.stats().queued:
        assert time.monotonic() < deadline, "the writer never took the queued batches"
        await asyncio.sleep(0.005)


async def test_queued_commits_land_one_transaction_each_in_call_order(store: LmdbStore) -> None:
    """Batches queued behind a held write lock are not merged: each is its own transaction."""
    before = txn_id(store)
    with write_lock_held(store):
        tasks = [asyncio.create_task(store.commit(Batch(runtimes={"r1": {"v": i}}))) for i in range(30)]
        await asyncio.sleep(0.05)
        assert not any(t.done() for t in tasks)
    await asyncio.gather(*tasks)

    assert store.get_runtime("r1") == {"v": 29}
    assert txn_id(store) - before == 30
    stats = store.stats()
    assert (stats.transactions, stats.failed, stats.queued) == (30, 0, 0)


async def test_a_commit_returns_only_once_its_transaction_committed(store: LmdbStore) -> None:
    with write_lock_held(store):
        task = asyncio.create_task(store.commit(small("r1")))
        await asyncio.sleep(0.1)
        assert not task.done()
        assert store.get_runtime("r1") is None
    await task
    assert store.get_runtime("r1") == {"v": 1}


async def test_a_full_batch_fails_alone_and_its_neighbours_land(tmp_path: Path) -> None:
    store = LmdbStore(tmp_path / "data", map_size=SMALL_MAP)
    try:
        with write_lock_held(store):
            blocker = asyncio.create_task(store.commit(small("r0")))
            await until_drained(store)
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
        assert (stats.transactions, stats.failed) == (3, 1)
    finally:
        store.close()


async def test_a_cancelled_caller_still_gets_its_batch_written(store: LmdbStore) -> None:
    with write_lock_held(store):
        task = asyncio.create_task(store.commit(small("r1")))
        await until_drained(store)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    await store.commit(small("r2"))  # queued behind it: once this landed, so did r1
    assert store.runtime_ids() == ["r1", "r2"]


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
