"""The driver choice on evidence: the store's commit, psycopg 3 (pipeline mode) against asyncpg.

    bench/.venv/bin/python -m bench.pg_driver            # a short run, prints the figures
    bench/.venv/bin/python -m bench.pg_driver --commits 1000 --reps 5

One commit is the shape of the daemon's ``store.postgres.write``: one transaction holding an
upsert of a handle (with its index columns), of its checkpoint, two transcript
messages and two events with the runtime's next ``seq`` — the statements of
``store.postgres.write.SQL`` on the tables of ``store.postgres.schema``, values of ~500 bytes. It runs
with ``synchronous_commit`` on (what the daemon acknowledges) and off (the
``--no-sync`` mode, where the driver's own cost is not hidden behind the WAL
flush), on one connection over the server's unix socket, one commit at a time.

Variants, their repetitions alternating so a burst of other load hits all:

* ``psycopg_sync`` — what is built: a blocking connection, ``transaction()`` +
  ``pipeline()`` + ``executemany`` per statement (``store.postgres.write._write`` itself);
* ``psycopg_one_sync`` — the same statements with the pipeline opened outside the
  transaction, so BEGIN, the statements and COMMIT travel in one round trip
  (what is built sends BEGIN, then the pipeline, then COMMIT: three);
* ``psycopg_thread`` — the same called from asyncio through a thread, as the
  daemon's event loop hands a commit to its writer thread;
* ``psycopg_async`` — psycopg's ``AsyncConnection``, same pipeline;
* ``asyncpg`` — ``async with conn.transaction()`` and ``executemany`` per
  statement, each awaited in turn (asyncpg has no cross-statement pipeline);
* ``asyncpg_one_statement`` — asyncpg's best case: the whole commit as one
  statement (writable CTEs, rows as arrays through ``unnest``), one round trip,
  its own implicit transaction. What a switch would have to write;
* ``psycopg_one_statement`` — the same one statement through psycopg, to tell
  the driver from the SQL shape.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg
import psycopg

from toolnexus_daemon.store.postgres import schema as pg_schema
from toolnexus_daemon.store.postgres.write import SQL, _write

from .common import log, summary
from .pg_server import durable_server

VARIANTS = ("psycopg_sync", "psycopg_one_sync", "psycopg_thread", "psycopg_async", "asyncpg",
            "asyncpg_one_statement", "psycopg_one_statement")
VALUE = os.urandom(500)


class Shape:
    """The rows of successive commits of one runtime (handle ids cycle, seq and message index grow)."""

    def __init__(self, rid: str) -> None:
        self.rid, self.seq, self.n = rid, 0, 0

    def next_ops(self) -> list[tuple[str, list[tuple[Any, ...]]]]:
        self.n += 1
        hid, rid = f"h{self.n % 64:04d}", self.rid
        self.seq += 2
        return [(SQL["handles"], [(rid, hid, VALUE, False, "suspended", "approval", time.time(), None)]),
                (SQL["messages"], [(rid, hid, self.n * 2, VALUE), (rid, hid, self.n * 2 + 1, VALUE)]),
                (SQL["checkpoints"], [(rid, hid, VALUE)]),
                (SQL["events"], [(rid, self.seq - 1, VALUE), (rid, self.seq, VALUE)])]


ONE_STATEMENT = """
WITH h AS (INSERT INTO tn_handles (rid, hid, value, recover, state, open_kind, since)
           VALUES ($1, $2, $3, $4, $5, $6, $7)
           ON CONFLICT (rid, hid) DO UPDATE SET value = EXCLUDED.value, recover = EXCLUDED.recover,
             state = EXCLUDED.state, open_kind = EXCLUDED.open_kind, since = EXCLUDED.since),
     m AS (INSERT INTO tn_messages (rid, hid, idx, value)
           SELECT $1, $2, i, v FROM unnest($8::bigint[], $9::bytea[]) AS t(i, v)
           ON CONFLICT (rid, hid, idx) DO UPDATE SET value = EXCLUDED.value),
     c AS (INSERT INTO tn_checkpoints (rid, hid, value) VALUES ($1, $2, $10)
           ON CONFLICT (rid, hid) DO UPDATE SET value = EXCLUDED.value),
     e AS (INSERT INTO tn_events (rid, seq, value)
           SELECT $1, s, v FROM unnest($11::bigint[], $12::bytea[]) AS t(s, v)
           ON CONFLICT (rid, seq) DO UPDATE SET value = EXCLUDED.value)
SELECT 1"""


def _one_statement_args(ops: list[tuple[str, list[tuple[Any, ...]]]]) -> tuple[Any, ...]:
    handle, messages, checkpoint, events = (rows for _, rows in ops)
    rid, hid, value, recover, state, open_kind, since, _expires = handle[0]
    return (rid, hid, value, recover, state, open_kind, since,
            [m[2] for m in messages], [m[3] for m in messages],
            checkpoint[0][2], [e[1] for e in events], [e[2] for e in events])


ONE_STATEMENT_PSYCOPG = re.sub(r"\$(\d+)", r"%(p\1)s", ONE_STATEMENT).encode()


def _dollar(sql: str) -> str:
    """psycopg's ``%s`` placeholders as asyncpg's ``$1, $2, …``."""
    counter = iter(range(1, 1000))
    return re.sub(r"%s", lambda _: f"${next(counter)}", sql)


async def _open(dsn: str, sync: bool) -> dict[str, Any]:
    setting = "on" if sync else "off"
    blocking = psycopg.connect(dsn, autocommit=True)
    blocking.execute(f"SET synchronous_commit = {setting}".encode())
    aconn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    await aconn.execute(f"SET synchronous_commit = {setting}".encode())
    apg = await asyncpg.connect(dsn, server_settings={"synchronous_commit": setting})
    return {"psycopg": blocking, "psycopg_async": aconn, "asyncpg": apg}


def _committers(conns: dict[str, Any]) -> dict[str, Callable[[Shape], Awaitable[None]]]:
    blocking, aconn, apg = conns["psycopg"], conns["psycopg_async"], conns["asyncpg"]

    async def psycopg_sync(shape: Shape) -> None:
        _write(blocking, shape.next_ops())

    async def psycopg_one_sync(shape: Shape) -> None:
        with blocking.pipeline(), blocking.transaction(), blocking.cursor() as cur:
            for sql, rows in shape.next_ops():
                cur.executemany(sql.encode(), rows)

    async def psycopg_thread(shape: Shape) -> None:
        await asyncio.to_thread(_write, blocking, shape.next_ops())

    async def psycopg_async(shape: Shape) -> None:
        async with aconn.transaction(), aconn.pipeline(), aconn.cursor() as cur:
            for sql, rows in shape.next_ops():
                await cur.executemany(sql.encode(), rows)

    async def asyncpg_commit(shape: Shape) -> None:
        async with apg.transaction():
            for sql, rows in shape.next_ops():
                await apg.executemany(_dollar(sql), rows)

    async def asyncpg_one(shape: Shape) -> None:
        await apg.execute(ONE_STATEMENT, *_one_statement_args(shape.next_ops()))

    async def psycopg_one(shape: Shape) -> None:
        args = _one_statement_args(shape.next_ops())
        blocking.execute(ONE_STATEMENT_PSYCOPG, {f"p{i + 1}": a for i, a in enumerate(args)})

    return {"psycopg_one_statement": psycopg_one, "psycopg_sync": psycopg_sync,
            "psycopg_one_sync": psycopg_one_sync,
            "psycopg_thread": psycopg_thread, "psycopg_async": psycopg_async,
            "asyncpg": asyncpg_commit, "asyncpg_one_statement": asyncpg_one}


async def _measure(dsn: str, sync: bool, commits: int, reps: int) -> dict[str, Any]:
    conns = await _open(dsn, sync)
    try:
        commit = _committers(conns)
        shapes = {v: Shape(f"rt-{v}-{'sync' if sync else 'nosync'}") for v in VARIANTS}
        for v in VARIANTS:  # warm-up: connections, prepared statements, table pages
            for _ in range(max(20, commits // 10)):
                await commit[v](shapes[v])
        per_rep: dict[str, list[float]] = {v: [] for v in VARIANTS}
        for rep in range(reps):
            order = VARIANTS if rep % 2 == 0 else VARIANTS[::-1]
            for v in order:
                lat = []
                for _ in range(commits):
                    t0 = time.perf_counter()
                    await commit[v](shapes[v])
                    lat.append(time.perf_counter() - t0)
                per_rep[v].append(statistics.median(lat))
        out: dict[str, Any] = {v: {"commit_ms": summary(per_rep[v], 1e3, 4)} for v in VARIANTS}
        base = out["psycopg_sync"]["commit_ms"]["median"]
        for v in VARIANTS:
            out[v]["over_psycopg_sync"] = round(out[v]["commit_ms"]["median"] / base, 3)
        thread = out["psycopg_thread"]["commit_ms"]["median"]
        out["asyncpg_over_psycopg_thread"] = round(out["asyncpg"]["commit_ms"]["median"] / thread, 3)
        out["asyncpg_one_statement_over_psycopg_thread"] = round(
            out["asyncpg_one_statement"]["commit_ms"]["median"] / thread, 3)
        return out
    finally:
        conns["psycopg"].close()
        await conns["psycopg_async"].close()
        await conns["asyncpg"].close()


def measure(dsn: str, commits: int, reps: int) -> dict[str, Any]:
    """Both ``synchronous_commit`` modes on the database of ``dsn`` (store schema applied here)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        pg_schema.migrate(conn, "benchmark database")
    out: dict[str, Any] = {"commits_per_rep": commits, "reps": reps,
                           "versions": {"psycopg": psycopg.__version__, "asyncpg": asyncpg.__version__}}
    for sync in (True, False):
        mode = "synchronous_commit_on" if sync else "synchronous_commit_off"
        out[mode] = asyncio.run(_measure(dsn, sync, commits, reps))
        log(f"pg driver {mode}: "
            + ", ".join(f"{v} {out[mode][v]['commit_ms']['median']} ms" for v in VARIANTS))
    return out


def scenario(prof: Any) -> dict[str, Any]:
    """The benchmark's ``pgd`` scenario: a server of its own, ``floor_calls`` commits per repetition."""
    with durable_server() as server:
        res = measure(server.fresh_database("driver"), prof.floor_calls, prof.reps)
        res["server"] = server.settings()
    return res


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.pg_driver")
    p.add_argument("--commits", type=int, default=200, help="commits per repetition and variant (1..100000)")
    p.add_argument("--reps", type=int, default=3, help="repetitions (1..50)")
    ns = p.parse_args(argv)
    if not (1 <= ns.commits <= 100_000 and 1 <= ns.reps <= 50):
        p.error("--commits must be in 1..100000 and --reps in 1..50")
    with durable_server() as server:
        res = measure(server.fresh_database("driver"), ns.commits, ns.reps)
        res["server"] = server.settings()
    print(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
