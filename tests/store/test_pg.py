"""What only the PostgreSQL store has: schema versions, one database transaction per batch,
the sync flag, damaged rows, error mapping at the edge and reconnecting after an outage."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import errors as pgerr

from tests.support.pg import PgServer
from tests.support.stall_proxy import StallProxy, StallProxyProcess
from toolnexus_daemon.config import load
from toolnexus_daemon.errors import FormatTooNew, StoreError, StoreFull, StoreUnavailable
from toolnexus_daemon.store import Batch
from toolnexus_daemon.store.dsn import redact
from toolnexus_daemon.store.postgres import lanes
from toolnexus_daemon.store.postgres.link import Link
from toolnexus_daemon.store.postgres.schema import SCHEMA_VERSION
from toolnexus_daemon.store.postgres.store import PgStore

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


async def test_a_commit_is_answered_while_the_event_loop_is_busy(pg_dsn: str) -> None:
    """Through a proxy in its own process (20 ms each way, a 40 ms round trip), with the event loop
    busy (work in 2 ms slices, as under many clients) and threads switching the GIL only every
    50 ms: a commit still takes about its round trip. The loop sends the transaction and reads its
    answer itself between slices; a writer thread would wait for the GIL to be woken and again
    for the answer (50 ms each here: 140 ms and more)."""
    proxy, slow_dsn = StallProxyProcess.for_dsn(pg_dsn, delay=0.02)
    store = PgStore(slow_dsn)
    interval = sys.getswitchinterval()
    try:
        await store.commit(Batch(runtimes={"warm": {"v": 0}}))  # the lane's connection opened
        busy = True

        async def spin() -> None:
            while busy:  # ends with the test; each slice holds the GIL 2 ms, then lets the loop run
                end = time.perf_counter() + 0.002
                while time.perf_counter() < end:
                    pass
                await asyncio.sleep(0)

        sys.setswitchinterval(0.05)
        spinner = asyncio.create_task(spin())
        try:
            await asyncio.sleep(0.01)
            took = [await _timed(store.commit(Batch(runtimes={"a": {"v": i}}, events=[event("a", i + 1)])))
                    for i in range(3)]
        finally:
            busy = False
            await spinner
        assert store.events("a")[-1].seq == 3
        assert min(took) < 0.09, f"commits took {[round(t * 1000) for t in took]} ms for a 40 ms round trip"
    finally:
        sys.setswitchinterval(interval)
        store.close()
        proxy.close()
