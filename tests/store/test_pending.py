"""The pending index (``Store.pending``): open suspensions oldest first, filtered and paged, on
every store; LMDB's incremental rows always equal the in-memory store's count from scratch."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

import lmdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.store.test_handle_index import batches
from toolnexus_daemon.model import JSON
from toolnexus_daemon.store import Batch, LmdbStore, MemoryStore, Store
from toolnexus_daemon.store.base import PendingQuery, PendingRow
from toolnexus_daemon.store.codec import META_FORMAT_KEY, Table


def parked(hid: str, kind: str, since: float, request_id: str = "") -> JSON:
    return {"id": hid, "state": "suspended", "wake_queue": [], "escalating": False, "suspended_at": since,
            "pending": {"id": request_id or f"q-{hid}", "kind": kind, "data": {"path": hid.split("/")}}}


def other(hid: str, state: str) -> JSON:
    return {"id": hid, "state": state, "wake_queue": [], "escalating": False}


SEEDED = {
    ("r1", "root/a"): parked("root/a", "approval", 30.0),
    ("r1", "root/b"): parked("root/b", "input", 10.0),
    ("r1", "root/c"): other("root/c", "running"),
    ("r2", "root/a"): parked("root/a", "approval", 20.0),
    ("r2", "root/x"): parked("root/x", "approval", 40.0),
    # suspended on its child's request: not a leaf, so not an open suspension of its own
    ("r2", "root/p"): {**parked("root/p", "approval", 5.0), "pending": {
        "id": "q-c", "kind": "approval", "data": {"path": ["root", "p", "c"]}}},
    ("r2", "root/p/c"): parked("root/p/c", "approval", 50.0, "q-c"),
}


def ids(rows: list[PendingRow]) -> list[tuple[str, str]]:
    return [(r.runtime_id, r.handle_id) for r in rows]


async def test_open_suspensions_come_oldest_first_across_runtimes_and_filtered(store: Store) -> None:
    """Leaves only, oldest first; a runtime, a kind and an age window each narrow the rows."""
    await store.commit(Batch(handles=dict(SEEDED)))

    every = store.pending(PendingQuery())
    assert ids(every) == [("r1", "root/b"), ("r2", "root/a"), ("r1", "root/a"), ("r2", "root/x"),
                          ("r2", "root/p/c")]
    assert [r.since for r in every] == [10.0, 20.0, 30.0, 40.0, 50.0]
    assert ids(store.pending(PendingQuery(runtime_id="r1"))) == [("r1", "root/b"), ("r1", "root/a")]
    assert ids(store.pending(PendingQuery(kind="input"))) == [("r1", "root/b")]
    assert ids(store.pending(PendingQuery(runtime_id="r2", kind="approval", limit=2))) == [
        ("r2", "root/a"), ("r2", "root/x")]
    assert ids(store.pending(PendingQuery(oldest=20.0, newest=40.0))) == [
        ("r2", "root/a"), ("r1", "root/a"), ("r2", "root/x")]
    assert store.pending(PendingQuery(runtime_id="r3")) == []
    assert store.pending(PendingQuery(kind="nothing")) == []
    assert store.pending(PendingQuery(limit=0)) == []


async def test_get_handles_reads_a_page_of_records_in_the_order_asked(store: Store) -> None:
    """One read for a page's records: the order of the keys, None for a key with no record."""
    await store.commit(Batch(handles=dict(SEEDED)))
    keys = [("r2", "root/x"), ("r9", "root/none"), ("r1", "root/a"), ("r2", "root/x")]
    records = store.get_handles(keys)
    assert [None if r is None else r["id"] for r in records] == ["root/x", None, "root/a", "root/x"]
    assert records[0] == store.get_handle("r2", "root/x")
    assert store.get_handles([]) == []


@pytest.mark.parametrize("query", [PendingQuery(), PendingQuery(kind="approval"),
                                   PendingQuery(runtime_id="r1"),
                                   PendingQuery(runtime_id="r1", kind="approval")],
                         ids=["all", "kind", "runtime", "runtime-kind"])
async def test_pages_from_a_cursor_cover_every_row_once_even_with_equal_times(store: Store,
                                                                             query: PendingQuery) -> None:
    """Many suspensions parked in the same microsecond: pages of 3, each after the last row of the
    one before, give every row exactly once, in the one-shot order."""
    handles = {(rid, f"root/h{i:02d}"): parked(f"root/h{i:02d}", "approval" if i % 4 else "input",
                                               7.0 + i // 5)
               for rid in ("r1", "r2") for i in range(17)}
    await store.commit(Batch(handles=handles))
    whole = store.pending(PendingQuery(query.runtime_id, query.kind, limit=1000))
    paged: list[PendingRow] = []
    for _ in range(100):
        page = store.pending(PendingQuery(query.runtime_id, query.kind, after=paged[-1] if paged else None,
                                          limit=3))
        if not page:
            break
        paged.extend(page)
    assert paged == whole and len(set(paged)) == len(paged)
    assert [r.since for r in whole] == sorted(r.since for r in whole)
    expected = {k for k, rec in handles.items() if (query.runtime_id in (None, k[0]))
                and query.kind in (None, rec["pending"]["kind"])}
    assert set(ids(whole)) == expected


async def test_answered_reparked_deleted_and_purged_suspensions_leave_the_index(store: Store) -> None:
    """A resumed handle leaves, a handle parked again moves to its new time, a deleted one and a
    purged runtime's leave every listing (the cross-runtime one included)."""
    await store.commit(Batch(handles=dict(SEEDED)))
    await store.commit(Batch(handles={("r1", "root/b"): other("root/b", "running"),
                                      ("r2", "root/a"): parked("root/a", "input", 60.0, "q-again"),
                                      ("r2", "root/x"): None}))
    assert ids(store.pending(PendingQuery())) == [("r1", "root/a"), ("r2", "root/p/c"), ("r2", "root/a")]
    assert ids(store.pending(PendingQuery(kind="input"))) == [("r2", "root/a")]
    await store.commit(Batch(purge=["r2"]))
    assert ids(store.pending(PendingQuery())) == [("r1", "root/a")]
    assert ids(store.pending(PendingQuery(kind="approval"))) == [("r1", "root/a")]
    assert store.pending(PendingQuery(runtime_id="r2")) == []


async def test_a_store_of_format_2_gets_its_pending_rows_built(tmp_path: Path) -> None:
    """A data dir written before the pending index existed gets its rows when first opened."""
    data = tmp_path / "data"
    store = LmdbStore(data, sync=False)
    try:
        await store.commit(Batch(handles=dict(SEEDED)))
        expected = store.pending(PendingQuery())
    finally:
        store.close()
    with lmdb.open(str(data), max_dbs=16) as env, env.begin(write=True) as txn:  # what version 2 left
        index = env.open_db(Table.HANDLE_INDEX.encode(), txn=txn)
        doomed = [bytes(k) for k, _ in txn.cursor(db=index) if bytes(k)[:1] == b"\x00" or b"\x00\x04" in k
                  or b"\x00\x05" in k]
        for key in doomed:
            txn.delete(key, db=index)
        txn.put(META_FORMAT_KEY, b"2", db=env.open_db(b"meta", txn=txn))
    store = LmdbStore(data, sync=False)
    try:
        assert doomed and store.pending(PendingQuery()) == expected
        assert ids(store.pending(PendingQuery(runtime_id="r1", kind="input"))) == [("r1", "root/b")]
    finally:
        store.close()


def listings(store: Any) -> list[Any]:
    """Every family, as sets (LMDB orders equal times by digests, memory by ids)."""
    queries = [PendingQuery(runtime_id=r, kind=k, limit=1000) for r in (None, "r1", "r2")
               for k in (None, "approval", "input", "oauth")]
    return [set(store.pending(q)) for q in queries]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(groups=st.lists(st.lists(batches(), min_size=1, max_size=3), min_size=1, max_size=8))
def test_lmdb_pending_rows_equal_a_count_from_scratch(groups: list[list[Batch]]) -> None:
    """Random writes, deletes and purges leave LMDB's pending rows equal to the memory store's."""
    async def run() -> tuple[list[Any], list[Any]]:
        memory = MemoryStore()
        with tempfile.TemporaryDirectory() as tmp:
            lmdb_store = LmdbStore(Path(tmp) / "data", sync=False, map_size=1 << 24)
            try:
                for group in groups:
                    await asyncio.gather(*(memory.commit(b) for b in group))
                    await asyncio.gather(*(lmdb_store.commit(b) for b in group))
                return listings(memory), listings(lmdb_store)
            finally:
                lmdb_store.close()

    from_scratch, indexed = asyncio.run(run())
    assert indexed == from_scratch
