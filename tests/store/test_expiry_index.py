"""The expiry index (``Store.expiring``): open suspensions soonest first, kept with every handle
write on memory, LMDB and PostgreSQL, and built for a store written before it existed."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

import lmdb
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolnexus_daemon.clock import rfc3339
from toolnexus_daemon.model import JSON
from toolnexus_daemon.store import Batch, LmdbStore, MemoryStore, Store
from toolnexus_daemon.store.expiry import expiry_of
from toolnexus_daemon.store.postgres.store import PgStore

from .samples import record

T0 = 1_800_000_000.0


def suspended(hid: str, expires: float | str | None, *, leaf: str | None = None, escalating: bool = False,
              request: str = "q") -> JSON:
    pending: JSON = {"id": request, "kind": "approval", "data": {"path": (leaf or hid).split("/")}}
    if expires is not None:
        pending["expires_at"] = rfc3339(expires) if isinstance(expires, float) else expires
    return record(id=hid, state="suspended", wake_queue=[], escalating=escalating, pending=pending,
                  suspended_at=T0)


def test_what_a_record_contributes() -> None:
    """Only an open suspension of a leaf, not escalating inline, with a timestamp, has an expiry."""
    assert expiry_of(suspended("root/a", T0 + 1.5)) == T0 + 1.5
    assert expiry_of(suspended("root/a", None)) is None
    assert expiry_of(suspended("root/a", "next tuesday")) is None
    assert expiry_of(suspended("root/a", T0 + 1, leaf="root/a/b")) is None, "a parent of the leaf"
    assert expiry_of(suspended("root/a", T0 + 1, escalating=True)) is None
    assert expiry_of({**suspended("root/a", T0 + 1), "state": "closed"}) is None
    assert expiry_of({**suspended("root", T0 + 1)}) is None, "the root is never an open suspension"


async def test_the_index_follows_every_handle_write(store: Store) -> None:
    await store.commit(Batch(handles={
        ("r1", "root/a"): suspended("root/a", T0 + 30),
        ("r1", "root/b"): suspended("root/b", T0 + 10),
        ("r1", "root/c"): suspended("root/c", None),
        ("r1", "root/p"): suspended("root/p", T0 + 5, leaf="root/p/l"),
        ("r1", "root/p/l"): suspended("root/p/l", T0 + 20),
        ("r1", "root/e"): suspended("root/e", T0 + 1, escalating=True),
        ("r2", "root/a"): suspended("root/a", T0 + 2)}))
    assert store.expiring("r1", 10) == [(T0 + 10, "root/b"), (T0 + 20, "root/p/l"), (T0 + 30, "root/a")]
    assert store.expiring("r1", 2) == [(T0 + 10, "root/b"), (T0 + 20, "root/p/l")]
    assert store.expiring("r1", 0) == [] and store.expiring("r3", 10) == []
    assert store.expiring("r2", 10) == [(T0 + 2, "root/a")]

    await store.commit(Batch(handles={
        ("r1", "root/b"): suspended("root/b", T0 + 40, request="q2"),  # a new suspension: moved
        ("r1", "root/a"): {**suspended("root/a", T0 + 30), "state": "idle"},  # answered
        ("r1", "root/p/l"): None}))  # deleted
    assert store.expiring("r1", 10) == [(T0 + 40, "root/b")]

    await store.commit(Batch(handles={("r1", "root/b"): suspended("root/b", T0 + 40, request="q2")}))
    assert store.expiring("r1", 10) == [(T0 + 40, "root/b")], "an unchanged expiry keeps one row"

    await store.commit(Batch(purge=["r1"]))
    assert store.expiring("r1", 10) == [] and store.expiring("r2", 10) == [(T0 + 2, "root/a")]


HANDLES = ["root/a", "root/b", "root/a/c"]


@st.composite
def handle_records(draw: Any, hid: str) -> JSON:
    if draw(st.booleans()):
        return record(id=hid, state=draw(st.sampled_from(["idle", "running", "closed"])), wake_queue=[])
    expires = draw(st.sampled_from([None, "bad", T0 + 1, T0 + 2, T0 + 3.25]))
    return suspended(hid, expires, leaf=draw(st.sampled_from([hid, "root/other"])),
                     escalating=draw(st.integers(0, 4)) == 0)


@st.composite
def batches(draw: Any) -> Batch:
    # a purge may carry handle writes too: what the engine's committer merges from a purge and the
    # changes queued after it (of that runtime or another) into one transaction
    purge = [draw(st.sampled_from(["r1", "r2"]))] if draw(st.integers(0, 9)) == 0 else []
    touched = draw(st.lists(st.tuples(st.sampled_from(["r1", "r2"]), st.sampled_from(HANDLES)),
                            min_size=0 if purge else 1, max_size=3, unique=True))
    return Batch(purge=purge,
                 handles={key: None if draw(st.integers(0, 5)) == 0 else draw(handle_records(key[1]))
                          for key in touched})


def readings(store: Any) -> list[Any]:
    """Each runtime's rows as a set: rows with one expiry may come in any order of their ids."""
    return [(rid, sorted(store.expiring(rid, 100))) for rid in ("r1", "r2")]


async def apply_all(store: Any, groups: list[list[Batch]]) -> None:
    for group in groups:  # queued together: applied in call order, one transaction each
        await asyncio.gather(*(store.commit(b) for b in group))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(groups=st.lists(st.lists(batches(), min_size=1, max_size=3), min_size=1, max_size=8))
def test_lmdb_rows_equal_a_reading_from_scratch(groups: list[list[Batch]]) -> None:
    memory = MemoryStore()
    with tempfile.TemporaryDirectory() as tmp:
        lmdb_store = LmdbStore(Path(tmp) / "data", map_size=1 << 24, sync=False)
        try:
            asyncio.run(apply_all(memory, groups))
            asyncio.run(apply_all(lmdb_store, groups))
            assert readings(lmdb_store) == readings(memory)
        finally:
            lmdb_store.close()


async def test_an_lmdb_store_written_before_the_index_gets_it_built(tmp_path: Path) -> None:
    store = LmdbStore(tmp_path / "data", map_size=1 << 24)
    await store.commit(Batch(handles={("r1", "root/a"): suspended("root/a", T0 + 7),
                                      ("r1", "root/b"): suspended("root/b", None)}))
    store.close()
    env = lmdb.open(str(tmp_path / "data"), max_dbs=16, subdir=True)
    with env.begin(write=True) as txn:  # as a daemon without the index left it
        txn.drop(env.open_db(b"expiries", txn=txn), delete=True)
        txn.delete(b"expiry_index", db=env.open_db(b"meta", txn=txn))
    env.close()
    store = LmdbStore(tmp_path / "data", map_size=1 << 24)
    try:
        assert store.expiring("r1", 10) == [(T0 + 7, "root/a")]
    finally:
        store.close()


async def test_a_postgres_store_of_schema_3_gets_its_expiries_filled_in(pg_dsn: str) -> None:
    store = PgStore(pg_dsn)
    await store.commit(Batch(handles={("r1", "root/a"): suspended("root/a", T0 + 7),
                                      ("r1", "root/b"): suspended("root/b", "bad"),
                                      ("r1", "root/e"): suspended("root/e", T0 + 1, escalating=True)}))
    store.close()
    with psycopg.connect(pg_dsn, autocommit=True) as conn:  # back to what schema 3 had
        conn.execute(b"ALTER TABLE tn_handles DROP COLUMN expires")
        conn.execute(b"UPDATE tn_meta SET value = '3' WHERE key = 'schema'")
    store = PgStore(pg_dsn)
    try:
        [(when, hid)] = store.expiring("r1", 10)
        assert when == pytest.approx(T0 + 7) and hid == "root/a"
    finally:
        store.close()
