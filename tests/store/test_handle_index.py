"""LMDB's incrementally kept handle indexes always equal a count from scratch (property test).

The in-memory store derives the recovery list and the census from every record on each
read; LMDB keeps them with each write, taking back what the previous summary contributed.
Random sequences of handle writes, deletes and purges, grouped into batches and groups,
must leave both reading the same.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolnexus_daemon.errors import StoreFull
from toolnexus_daemon.model import JSON
from toolnexus_daemon.store import Batch, LmdbStore, MemoryStore

HANDLES = ["root", "root/a", "root/b", "root/a/c", "root/b/d"]
KINDS = ["approval", "input", "oauth"]


@st.composite
def handle_records(draw: Any, hid: str) -> JSON:
    state = draw(st.sampled_from(["idle", "running", "suspended", "closed"]))
    rec: JSON = {"id": hid, "state": state, "escalating": draw(st.booleans()) and state == "suspended",
                 "wake_queue": [["x", "go"]] * draw(st.integers(0, 2))}
    if state == "suspended" and draw(st.booleans()):
        leaf = draw(st.sampled_from([hid, "root/other"]))
        rec["pending"] = {"id": draw(st.sampled_from(["q1", "q2"])), "kind": draw(st.sampled_from(KINDS)),
                          "data": {"path": leaf.split("/")}}
        rec["suspended_at"] = float(draw(st.integers(1, 50)))
    return rec


@st.composite
def batches(draw: Any) -> Batch:
    # a purge may carry handle writes too: what the engine's committer merges from a purge and the
    # changes queued after it (of that runtime or another) into one transaction
    purge = [draw(st.sampled_from(["r1", "r2"]))] if draw(st.integers(0, 9)) == 0 else []
    touched = draw(st.lists(st.tuples(st.sampled_from(["r1", "r2"]), st.sampled_from(HANDLES)),
                            min_size=0 if purge else 1, max_size=4, unique=True))
    return Batch(purge=purge,
                 handles={key: None if draw(st.integers(0, 5)) == 0 else draw(handle_records(key[1]))
                          for key in touched})


def readings(store: Any) -> list[Any]:
    return [(rid, store.handles_to_recover(rid), store.census(rid)) for rid in ("r1", "r2")]


async def apply_all(store: Any, groups: list[list[Batch]]) -> None:
    for group in groups:  # queued together: applied in call order, one transaction each
        await asyncio.gather(*(store.commit(b) for b in group))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(groups=st.lists(st.lists(batches(), min_size=1, max_size=3), min_size=1, max_size=8))
def test_lmdb_indexes_equal_a_count_from_scratch(groups: list[list[Batch]]) -> None:
    memory = MemoryStore()
    with tempfile.TemporaryDirectory() as tmp:
        lmdb_store = LmdbStore(Path(tmp) / "data", map_size=1 << 24, sync=False)
        try:
            asyncio.run(apply_all(memory, groups))
            asyncio.run(apply_all(lmdb_store, groups))
            assert readings(lmdb_store) == readings(memory)
        finally:
            lmdb_store.close()


def test_a_record_only_the_exact_reader_parses_is_taken_back_from_the_index(tmp_path: Path) -> None:
    """The index reads the record a write replaces with ``orjson``; one written by the ``json``
    fallback (an integer beyond 64 bits) with a NaN literal in it is refused by ``orjson`` and read
    exactly instead, so overwriting it still takes back its count and its open suspension."""
    odd = {"big": 2 ** 70, "nan": float("nan")}
    parked: JSON = {"id": "root/a", "state": "suspended", "escalating": False, "wake_queue": [],
                    "pending": {"id": "q1", "kind": "input", "data": {"path": ["root", "a"], **odd}},
                    "suspended_at": 7.0}
    closed: JSON = {"id": "root/a", "state": "closed", "escalating": False, "wake_queue": []}
    groups = [[Batch(handles={("r1", "root/a"): parked})], [Batch(handles={("r1", "root/a"): closed})]]
    memory = MemoryStore()
    lmdb_store = LmdbStore(tmp_path / "data", map_size=1 << 24, sync=False)
    try:
        asyncio.run(apply_all(memory, groups[:1]))
        asyncio.run(apply_all(lmdb_store, groups[:1]))
        assert lmdb_store.census("r1") == memory.census("r1")
        assert memory.census("r1").open == {"input": (1, 7.0)}
        asyncio.run(apply_all(memory, groups[1:]))
        asyncio.run(apply_all(lmdb_store, groups[1:]))
        assert readings(lmdb_store) == readings(memory)
        assert lmdb_store.census("r1").open == {} and lmdb_store.census("r1").states == {"closed": 1}
    finally:
        lmdb_store.close()


def test_a_write_whose_transaction_failed_is_not_taken_back_as_if_it_had_landed(tmp_path: Path) -> None:
    """The writer remembers the contribution of each handle record it writes, so the next write of
    that handle need not decode it; a transaction that then fails (here the map fills up with a
    message written beside the record) leaves the older record stored, and the next write must
    take back what that one contributes: the memory is used only for the exact bytes it holds."""
    parked: JSON = {"id": "root/a", "state": "suspended", "escalating": False, "wake_queue": [],
                    "pending": {"id": "q1", "kind": "input", "data": {"path": ["root", "a"]}},
                    "suspended_at": 7.0}
    closed: JSON = {"id": "root/a", "state": "closed", "escalating": False, "wake_queue": []}
    idle: JSON = {"id": "root/a", "state": "idle", "escalating": False, "wake_queue": []}
    memory = MemoryStore()
    lmdb_store = LmdbStore(tmp_path / "data", map_size=1 << 22, sync=False)
    try:
        asyncio.run(apply_all(memory, [[Batch(handles={("r1", "root/a"): parked})]]))
        asyncio.run(apply_all(lmdb_store, [[Batch(handles={("r1", "root/a"): parked})]]))
        too_big = Batch(handles={("r1", "root/a"): closed},
                        messages=[("r1", "root/a", 0, {"text": "x" * (8 << 20)})])
        with pytest.raises(StoreFull):
            asyncio.run(apply_all(lmdb_store, [[too_big]]))
        assert readings(lmdb_store) == readings(memory)
        asyncio.run(apply_all(memory, [[Batch(handles={("r1", "root/a"): idle})]]))
        asyncio.run(apply_all(lmdb_store, [[Batch(handles={("r1", "root/a"): idle})]]))
        assert readings(lmdb_store) == readings(memory)
        assert lmdb_store.census("r1").open == {} and lmdb_store.census("r1").states == {"idle": 1}
    finally:
        lmdb_store.close()
