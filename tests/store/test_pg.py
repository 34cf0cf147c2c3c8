"""What only the PostgreSQL store has: schema versions, one database transaction per batch,
the sync flag, damaged rows, error mapping at the edge and reconnecting after an outage."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import errors as pgerr
from psycopg.pq import TransactionStatus

from tests.support.pg import PgServer
from tests.support.stall_proxy import StallProxy, StallProxyProcess
from toolnexus_daemon.config import load
from toolnexus_daemon.errors import FormatTooNew, StoreError, StoreFull, StoreUnavailable
from toolnexus_daemon.store import Batch
from toolnexus_daemon.store.dsn import redact
from toolnexus_daemon.store.postgres import lanes, wire
from toolnexus_daemon.store.postgres.link import Link
from toolnexus_daemon.store.postgres.schema import SCHEMA_VERSION
from toolnexus_daemon.store.postgres.store import PgStore
from toolnexus_daemon.store.postgres.write import UPSERT

from .samples import event, record


def sql(dsn: str, statement: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        cur = conn.execute(statement.encode())
        return cur.fetchall() if cur.description else []


def test_a_fresh_database_gets_the_current_schema_and_a_newer_one_is_refused(pg_dsn: str) -> None:
    PgStore(pg_dsn).close()
    assert sql(pg_dsn, "SELECT value FROM tn_meta WHERE key = 'schema'") == [(str(SCHEMA_VERSION),)]
    PgStore(pg_dsn).close()  # opening again migrates nothing

    sql(pg_dsn, f"UPDATE tn_meta SET value = '{SCHEMA_VERSION + 1}' WHERE key = 'schema'")
    with pytest.raises(FormatTooNew, match=f"version {SCHEMA_VERSION + 1}.*up to version {SCHEMA_VERSION}"):
        PgStore(pg_dsn)


async def test_queued_commits_land_in_order_one_transaction_each_and_a_refused_one_fails_alone(
        pg_dsn: str) -> None:
    """Commits queued together land in call order, one transaction each (grouping is the engine
    committer's); the one the database refuses (a trigger here) fails alone and its neighbours land."""
    store = PgStore(pg_dsn)
    sql(pg_dsn, """CREATE FUNCTION refuse() RETURNS trigger AS $$ BEGIN
                     IF NEW.rid = 'bad' THEN RAISE EXCEPTION 'refused by test'; END IF; RETURN NEW; END
                   $$ LANGUAGE plpgsql""")
    sql(pg_dsn, "CREATE TRIGGER refuse BEFORE INSERT ON tn_runtimes FOR EACH ROW EXECUTE FUNCTION refuse()")
    try:
        await asyncio.gather(*(store.commit(Batch(runtimes={"g": {"v": i}})) for i in range(40)))
        assert store.get_runtime("g") == {"v": 39}
        assert (store.stats().transactions, store.stats().failed) == (40, 0)

        commits = [store.commit(Batch(runtimes={"bad" if i == 20 else f"r{i:02d}": {"v": i}},
                                      events=[event("r", i + 1)])) for i in range(40)]
        results = await asyncio.gather(*commits, return_exceptions=True)
        failed = [i for i, r in enumerate(results) if isinstance(r, BaseException)]
        assert failed == [20] and isinstance(results[20], StoreError)
        assert "refused by test" in str(results[20])
        stored = [r for r in store.runtime_ids() if r.startswith("r")]
        assert stored == [f"r{i:02d}" for i in range(40) if i != 20]
        assert [e.seq for e in store.events("r")] == [i + 1 for i in range(40) if i != 20]
        assert store.stats().failed == 1
    finally:
        store.close()


async def test_sync_flag_sets_synchronous_commit(pg_dsn: str) -> None:
    for sync, expected in ((True, "on"), (False, "off")):
        link = Link(pg_dsn, sync=sync)
        with link.connect(autocommit=True) as conn:
            assert conn.execute("SHOW synchronous_commit").fetchone() == (expected,)


async def test_a_damaged_row_costs_that_record_only(pg_dsn: str) -> None:
    store = PgStore(pg_dsn)
    try:
        await store.commit(Batch(handles={("r1", "root"): record(id="root"), ("r1", "h"): record(id="h")}))
        sql(pg_dsn, "UPDATE tn_handles SET value = '\\x544e02007b' WHERE hid = 'h'")
        with pytest.raises(StoreError, match="damaged record handles/r1/h"):
            store.get_handle("r1", "h")
        assert store.get_handle("r1", "root") == record(id="root")
    finally:
        store.close()


def test_errors_at_the_edge_mean_what_callers_can_act_on(pg_dsn: str) -> None:
    link = Link(pg_dsn)
    assert isinstance(link.failed(pgerr.DiskFull("could not extend file: No space left")), StoreFull)
    assert isinstance(link.failed(pgerr.ProgramLimitExceeded("value too long")), StoreFull)
    assert type(link.failed(pgerr.UniqueViolation("dup"))) is StoreError
    assert link.up
    down = link.failed(pgerr.AdminShutdown("terminating connection due to administrator command"))
    assert isinstance(down, StoreUnavailable) and down.code == "UNAVAILABLE"
    assert "PostgreSQL database postgresql://postgres@/" in str(down) and not link.up
    link.close()


async def test_a_serialisation_failure_runs_the_transaction_again(monkeypatch: pytest.MonkeyPatch) -> None:
    runs: list[int] = []

    async def flaky(failures: int) -> None:
        runs.append(1)
        if len(runs) <= failures:
            raise pgerr.SerializationFailure("could not serialize access")

    monkeypatch.setattr(lanes, "_transact", lambda *_: flaky(2))
    await lanes.write(None, [], set())  # type: ignore[arg-type]
    assert len(runs) == 3
    runs.clear()
    monkeypatch.setattr(lanes, "_transact", lambda *_: flaky(99))
    with pytest.raises(pgerr.SerializationFailure):
        await lanes.write(None, [], set())  # type: ignore[arg-type]
    assert len(runs) == lanes.SERIALIZATION_RETRIES + 1


async def test_reads_and_commits_recover_after_the_server_restarts(pg_server: PgServer, pg_dsn: str) -> None:
    """Stopped: UNAVAILABLE at once, nothing half-written; started: the link reconnects by itself,
    and connections opened before the outage are not reused."""
    store = PgStore(pg_dsn)
    try:
        await store.commit(Batch(runtimes={"r1": {"v": 1}}))
        pg_server.stop()
        try:
            with pytest.raises(StoreUnavailable):
                store.get_runtime("r1")
            with pytest.raises(StoreUnavailable):
                await store.commit(Batch(runtimes={"r1": {"v": 2}}, events=[event("r1", 1)]))
        finally:
            pg_server.start()
        for _ in range(100):
            if store.link.up:
                break
            await asyncio.sleep(0.05)
        assert store.link.up
        assert store.get_runtime("r1") == {"v": 1} and store.last_seq("r1") == 0
        await store.commit(Batch(runtimes={"r1": {"v": 3}}))
        assert store.get_runtime("r1") == {"v": 3}
    finally:
        store.close()


def test_the_dsn_is_shown_redacted_and_the_password_comes_from_a_file(tmp_path: Path) -> None:
    assert redact("postgresql://app:s3cret@db:5432/tn") == "postgresql://app:***@db:5432/tn"
    assert redact("postgresql://app@db/tn?password=s3cret&sslmode=require") == \
        "postgresql://app@db/tn?password=***&sslmode=require"
    secret = tmp_path / "pw"
    secret.write_text("s3cret\n")
    settings = load(["--store", "postgresql://app:inline@db/tn", "--store-password-file", str(secret)], {})
    assert settings.store_password == "s3cret"
    shown = settings.redacted()
    assert shown["store"] == "postgresql://app:***@db/tn" and "s3cret" not in repr(settings)
    assert "inline" not in str(shown) and "s3cret" not in str(shown)
    env = load([], {"TOOLNEXUS_STORE": "postgresql://app@/tn?host=/run/pg"})
    assert env.store == "postgresql://app@/tn?host=/run/pg" and env.store_password is None
    with pytest.raises(SystemExit):
        load(["--store", "mysql://x"], {})


async def test_a_commit_is_one_round_trip_and_commits_of_different_lanes_overlap(pg_dsn: str) -> None:
    """Through a proxy that delays every chunk 40 ms each way (an 80 ms round trip): a commit takes
    one round trip (BEGIN, the statements and COMMIT in one pipeline Sync), and commits of four
    lanes at once take about as long as one (each lane has its own writer connection)."""
    proxy, slow_dsn = StallProxy.for_dsn(pg_dsn, delay=0.04)
    store = PgStore(slow_dsn, commit_lanes=4)
    try:
        await store.commit(Batch(runtimes={"warm": {"v": 0}}))  # every writer's connection opened
        await asyncio.gather(*(store.commit(Batch(runtimes={f"w{i}": {"v": 0}}), i) for i in range(4)))
        one = await _timed(store.commit(Batch(runtimes={"a": {"v": 1}}, events=[event("a", 1)])))
        assert one < 0.16, f"a commit took {one * 1000:.0f} ms: more than one 80 ms round trip"
        four = await _timed(asyncio.gather(*(store.commit(Batch(runtimes={f"l{i}": {"v": i}}), i)
                                             for i in range(4))))
        assert four < 0.16, f"four commits in four lanes took {four * 1000:.0f} ms: they queued"
        assert store.get_runtime("l3") == {"v": 3} and store.events("a")[0].seq == 1
    finally:
        store.close()
        proxy.close()


async def _timed(work: Awaitable[object]) -> float:
    started = time.perf_counter()
    await work
    return time.perf_counter() - started


async def test_reads_through_read_overlap_and_leave_the_event_loop_free(pg_dsn: str) -> None:
    """Through the 40 ms-each-way proxy: four reads at once through ``Store.read`` take about one
    80 ms round trip (each reader thread has its own connection), and the event loop keeps
    running while they wait (a read called directly would hold it for the whole round trip)."""
    proxy, slow_dsn = StallProxy.for_dsn(pg_dsn, delay=0.04)
    store = PgStore(slow_dsn, read_connections=4)
    try:
        await store.commit(Batch(runtimes={f"r{i}": {"v": i} for i in range(4)}))
        # every reader thread opens its connection first
        await asyncio.gather(*(store.read(lambda s: s.get_runtime("r0")) for _ in range(8)))
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.005)
                ticks += 1

        ticker = asyncio.create_task(tick())
        try:
            started = time.perf_counter()
            got = await asyncio.gather(*(store.read(lambda s, i=i: s.get_runtime(f"r{i}"))
                                         for i in range(4)))
            took = time.perf_counter() - started
        finally:
            ticker.cancel()
        assert got == [{"v": i} for i in range(4)]
        assert took < 0.16, f"four reads took {took * 1000:.0f} ms: they queued behind each other"
        assert ticks >= 5, f"the event loop ran {ticks} times during an 80 ms read: it was held"
    finally:
        store.close()
        proxy.close()



async def test_a_commit_sends_one_statement_per_table_in_one_transaction(pg_dsn: str) -> None:
    """A batch of many rows reaches the server as one statement per table (the rows as arrays),
    all in one transaction: statement-level triggers log each statement and its transaction."""
    store = PgStore(pg_dsn)
    sql(pg_dsn, "CREATE TABLE seen (tab text, xid xid8)")
    sql(pg_dsn, "CREATE FUNCTION log_statement() RETURNS trigger AS $$ BEGIN "
                "INSERT INTO seen VALUES (TG_TABLE_NAME, pg_current_xact_id()); RETURN NULL; END $$ "
                "LANGUAGE plpgsql")
    for table in ("tn_runtimes", "tn_handles", "tn_messages", "tn_checkpoints", "tn_events"):
        sql(pg_dsn, f"CREATE TRIGGER log_{table} AFTER INSERT ON {table} FOR EACH STATEMENT "
                    "EXECUTE FUNCTION log_statement()")
    try:
        await store.commit(Batch(
            runtimes={f"r{i}": {"v": i} for i in range(3)},
            handles={("r0", f"h{i}"): record(id=f"h{i}") for i in range(5)},
            messages=[("r0", "h0", i, {"role": "user", "content": f"m{i}"}) for i in range(8)],
            checkpoints={("r0", f"h{i}"): {"step": i} for i in range(4)},
            events=[event("r0", i + 1) for i in range(10)]))
        seen = sql(pg_dsn, "SELECT tab, count(*), count(DISTINCT xid) FROM seen GROUP BY tab ORDER BY tab")
        assert seen == [("tn_checkpoints", 1, 1), ("tn_events", 1, 1), ("tn_handles", 1, 1),
                        ("tn_messages", 1, 1), ("tn_runtimes", 1, 1)]
        assert sql(pg_dsn, "SELECT count(DISTINCT xid) FROM seen") == [(1,)]
        assert [store.get_handle("r0", f"h{i}") for i in range(5)] == [record(id=f"h{i}") for i in range(5)]
        assert [m["content"] for m in store.messages("r0", "h0")] == [f"m{i}" for i in range(8)]
        assert [e.seq for e in store.events("r0")] == list(range(1, 11))
    finally:
        store.close()


async def test_parameters_reach_the_server_as_written(pg_dsn: str) -> None:
    """What ``wire`` encodes by hand (binary arrays, text parameters) reads back as it was written:
    NULLs among values, text beyond ASCII, empty and binary values, the extremes of bigint and
    doubles, booleans, and the same statement again on the connection that prepared it."""
    store = PgStore(pg_dsn)
    odd = "é ✓ \\ \" {braces}, 'quote', NULL, a,b"
    try:
        await store.commit(Batch(runtimes={odd: {"text": odd, "empty": ""}},
                                 events=[event(odd, 1), event(odd, (1 << 63) - 1)]))
        await store.commit(Batch(handles={(odd, "h"): record(id="h")}))
        assert store.get_runtime(odd) == {"text": odd, "empty": ""}
        assert [e.seq for e in store.events(odd)] == [1, (1 << 63) - 1]
        assert store.get_handle(odd, "h") == record(id="h")
    finally:
        store.close()
    upsert = wire.statement(UPSERT["handles"])
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.pgconn.nonblocking = 1
        conn.pgconn.enter_pipeline_mode()
        rows = [("w", "a", b"", True, None, "approval", 1.5e-300, None),
                ("w", "b", bytes(range(256)), False, "suspended", None, -0.0, 1.7976931348623157e308)]
        step = (UPSERT["handles"], [tuple(list(c) for c in zip(*rows, strict=True))])
        prepared: set[bytes] = set()
        await lanes.write(conn.pgconn, [step], prepared)  # prepared here
        assert prepared == {upsert.name}
        await lanes.write(conn.pgconn, [step], prepared)  # and reused
        assert conn.pgconn.transaction_status == TransactionStatus.IDLE  # every result read
        with pytest.raises(pgerr.NotNullViolation):  # refused: read up to its Sync, the connection idle
            await lanes.write(conn.pgconn, [(UPSERT["runtimes"], [(["w"], [None])])], prepared)
        assert conn.pgconn.transaction_status == TransactionStatus.IDLE
        conn.pgconn.exit_pipeline_mode()
        got = conn.execute("SELECT hid, value, recover, state, open_kind, since, expires FROM tn_handles "
                           "WHERE rid = 'w' ORDER BY hid").fetchall()
    assert got == [("a", b"", True, None, "approval", 1.5e-300, None),
                   ("b", bytes(range(256)), False, "suspended", None, -0.0, 1.7976931348623157e308)]


def test_the_proxy_process_delays_each_way_and_reports_how_late(pg_dsn: str) -> None:
    """The benchmarks' proxy in its own process: a query's round trip through it is twice the delay
    (a little more, never less), and it reports how late it passed chunks on."""
    proxy, slow_dsn = StallProxyProcess.for_dsn(pg_dsn, delay=0.02)
    try:
        with psycopg.connect(slow_dsn, autocommit=True) as conn:
            conn.execute("SELECT 1")
            proxy.late()  # the connection's start-up apart
            took = []
            for _ in range(5):
                started = time.perf_counter()
                conn.execute("SELECT 1")
                took.append(time.perf_counter() - started)
        late = proxy.late()
        shown = [round(t * 1000, 1) for t in took]
        assert 0.04 <= min(took) < 0.07, f"round trips of {shown} ms for 2 x 20 ms"
        assert late["count"] >= 10 and 0 <= late["p50_ms"] < 10
    finally:
        proxy.close()
    assert proxy.proc is None
