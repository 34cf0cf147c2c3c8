"""The ``versions`` table of every store (memory, LMDB, PostgreSQL): one row per registry version,
written in the transaction of the change that uses it, read back in number order, deleted by a
purge of its runtime; and a PostgreSQL database of schema 5 upgraded to hold it."""

from __future__ import annotations

import psycopg

from toolnexus_daemon.engine.definitions.versions import key_of
from toolnexus_daemon.store import Batch, Store
from toolnexus_daemon.store.postgres.schema import MIGRATIONS, SCHEMA_VERSION
from toolnexus_daemon.store.postgres.store import PgStore

from .samples import record
from .test_pg import sql


def _version(n: int) -> dict[str, object]:
    return {"number": n, "digest": f"d{n}", "created_at": float(n), "agents": [], "llm": {}}


async def test_versions_round_trip_in_number_order_and_go_with_a_purge(store: Store) -> None:
    rows = {("rt", key_of(n)): _version(n) for n in (10, 2, 1)}
    await store.commit(Batch(runtimes={"rt": record(id="rt"), "other": record(id="other")}, versions={
        **rows, ("other", key_of(1)): _version(1)}))
    assert [r["number"] for r in store.versions("rt")] == [1, 2, 10]
    assert store.get_version("rt", key_of(2)) == _version(2)
    assert store.get_version("rt", key_of(3)) is None
    await store.commit(Batch(versions={("rt", key_of(2)): None}))
    assert [r["number"] for r in store.versions("rt")] == [1, 10]
    await store.commit(Batch(purge=["rt"]))
    assert store.versions("rt") == [] and [r["number"] for r in store.versions("other")] == [1]


async def test_a_schema_5_database_is_upgraded_to_hold_versions(pg_dsn: str) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        for step in MIGRATIONS[:5]:
            for statement in step:
                conn.execute(statement.encode())
        conn.execute(b"INSERT INTO tn_meta (key, value) VALUES ('schema', '5')")
    store = PgStore(pg_dsn)
    try:
        assert SCHEMA_VERSION == 6
        assert sql(pg_dsn, "SELECT value FROM tn_meta WHERE key = 'schema'") == [("6",)]
        await store.commit(Batch(runtimes={"rt": record(id="rt")}, versions={("rt", key_of(1)): _version(1)}))
        assert store.versions("rt") == [_version(1)]
    finally:
        store.close()
    PgStore(pg_dsn).close()  # opened again: nothing left to migrate
