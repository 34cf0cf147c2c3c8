"""PostgreSQL reads off the event loop: the store's reader threads against an asyncio connection pool.

The daemon reads PostgreSQL through ``PgStore.read``: the read runs on one of ``READ_CONNECTIONS``
reader threads, each with its own synchronous psycopg connection, while the event loop waits for
nothing. The alternative is psycopg's ``AsyncConnection``: the same queries awaited on the loop
itself, from a pool of as many connections. Both read what a call that names a parked handle
reads — the handle's record and its checkpoint, two primary-key lookups — decoded the same way
(``store.codec``), from one durable embedded server (``pg_server``) reached over a unix socket,
directly or behind a delaying proxy that runs in a process of its own (``--delay-ms``: every chunk
passed on that much later, each way).

For each delay and each concurrency (``--readers``), each variant runs ``--reads`` reads per
reader, repetitions alternating which goes first; reported per variant: reads/s, read latency
p50/p99, this process's CPU per read, and the event loop's lateness meanwhile (a 1 ms timer: how
late it fires, p99), which is what a gRPC call arriving during the reads would wait.

    .venv/bin/python -m bench.pg_reads [--delay-ms 0 --delay-ms 3] [--readers 1 --readers 16]
        [--reads 200] [--reps 3] [--out results/....json]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg

from toolnexus_daemon.store import codec
from toolnexus_daemon.store.codec import Table
from toolnexus_daemon.store.postgres.store import READ_CONNECTIONS, PgStore

from .common import dump, log, machine, median, now_stamp
from .pg_server import durable_server

RID = "bench-reads"
HANDLES = 1_000
HANDLE_SQL = "SELECT value FROM tn_handles WHERE rid = %s AND hid = %s"
CHECKPOINT_SQL = "SELECT value FROM tn_checkpoints WHERE rid = %s AND hid = %s"
PROXY = """
import sys, time
sys.path.insert(0, sys.argv[3])
from tests.support.stall_proxy import StallProxy
proxy, dsn = StallProxy.for_dsn(sys.argv[1], float(sys.argv[2]))
print(dsn, flush=True)
sys.stdin.read()
proxy.close()
"""

Read = Callable[[str], Awaitable[Any]]


def _seed(dsn: str) -> None:
    """The schema (``PgStore`` migrates it) and ``HANDLES`` handles with ~1 KB records and checkpoints."""
    PgStore(dsn).close()
    with psycopg.connect(dsn, autocommit=True) as conn, conn.cursor() as cur:
        for n in range(HANDLES):
            hid = f"root/worker.{n}"
            rec = {"id": hid, "agent": "worker", "parent": "root", "state": "suspended", "pad": "h" * 800}
            cp = {"turn_start": 4, "step": 2, "pad": "c" * 800}
            cur.execute("INSERT INTO tn_handles (rid, hid, value, recover) VALUES (%s, %s, %s, false)",
                        (RID, hid, codec.encode_value(Table.HANDLES, b"k", rec)))
            cur.execute("INSERT INTO tn_checkpoints (rid, hid, value) VALUES (%s, %s, %s)",
                        (RID, hid, codec.encode_value(Table.CHECKPOINTS, b"k", cp)))


def _threads(store: PgStore) -> Read:
    """The daemon's path: ``PgStore.read`` on its reader threads."""
    async def read(hid: str) -> Any:
        return await store.read(lambda s: (s.get_handle(RID, hid), s.get_checkpoint(RID, hid)))
    return read


class AsyncPool:
    """``READ_CONNECTIONS`` psycopg ``AsyncConnection``s taken in turn (what a pool does, no more)."""

    def __init__(self) -> None:
        self._free: asyncio.Queue[psycopg.AsyncConnection[Any]] = asyncio.Queue()
        self._all: list[psycopg.AsyncConnection[Any]] = []

    async def open(self, dsn: str) -> AsyncPool:
        for _ in range(READ_CONNECTIONS):
            conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True, prepare_threshold=0)
            self._all.append(conn)
            self._free.put_nowait(conn)
        return self

    async def read(self, hid: str) -> Any:
        conn = await self._free.get()
        try:
            rec = await (await conn.execute(HANDLE_SQL, (RID, hid))).fetchone()
            cp = await (await conn.execute(CHECKPOINT_SQL, (RID, hid))).fetchone()
        finally:
            self._free.put_nowait(conn)
        return (codec.decode_value(Table.HANDLES, b"k", bytes(rec[0])) if rec else None,
                codec.decode_value(Table.CHECKPOINTS, b"k", bytes(cp[0])) if cp else None)

    async def close(self) -> None:
        for conn in self._all:
            await conn.close()


async def _lateness(stop: asyncio.Event, out: list[float]) -> None:
    """How late a 1 ms timer fires on this loop, until ``stop``."""
    while not stop.is_set():
        due = time.perf_counter() + 0.001
        await asyncio.sleep(0.001)
        out.append(max(0.0, time.perf_counter() - due))


async def _run(read: Read, readers: int, reads: int) -> dict[str, float]:
    latencies: list[float] = []
    late: list[float] = []

    async def reader(n: int) -> None:
        for i in range(reads):
            started = time.perf_counter()
            rec, cp = await read(f"root/worker.{(n * reads + i) % HANDLES}")
            assert rec is not None and cp is not None
            latencies.append(time.perf_counter() - started)

    stop = asyncio.Event()
    ticker = asyncio.ensure_future(_lateness(stop, late))
    cpu, wall = time.process_time(), time.perf_counter()
    await asyncio.gather(*(reader(n) for n in range(readers)))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    stop.set()
    await ticker
    latencies.sort()
    late.sort()
    total = readers * reads
    return {"reads_per_s": total / wall, "p50_ms": _pct(latencies, 0.5) * 1e3,
            "p99_ms": _pct(latencies, 0.99) * 1e3, "cpu_us_per_read": cpu / total * 1e6,
            "loop_late_p99_ms": _pct(late, 0.99) * 1e3}


def _pct(values: list[float], q: float) -> float:
    return values[min(len(values) - 1, int(q * len(values)))] if values else 0.0


@contextlib.contextmanager
def _proxied(dsn: str, delay_ms: float) -> Iterator[str]:
    """``dsn`` as seen through a delaying proxy in a process of its own (``dsn`` itself at 0)."""
    if not delay_ms:
        yield dsn
        return
    root = str(Path(__file__).resolve().parent.parent)
    proc = subprocess.Popen([sys.executable, "-c", PROXY, dsn, str(delay_ms / 1e3), root],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True)
    try:
        assert proc.stdout is not None
        yield proc.stdout.readline().strip()
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(10)


async def _sitting(dsn: str, readers: int, reads: int, reps: int) -> dict[str, list[dict[str, float]]]:
    store = PgStore(dsn)
    pool = await AsyncPool().open(dsn)
    variants: dict[str, Read] = {"threads": _threads(store), "asyncio": pool.read}
    out: dict[str, list[dict[str, float]]] = {name: [] for name in variants}
    try:
        await _run(variants["threads"], readers, 5)  # connections opened, statements warm
        await _run(variants["asyncio"], readers, 5)
        for rep in range(reps):
            order = list(variants) if rep % 2 == 0 else list(reversed(variants))
            for name in order:
                out[name].append(await _run(variants[name], readers, reads))
    finally:
        await pool.close()
        store.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--delay-ms", type=float, action="append")
    parser.add_argument("--readers", type=int, action="append")
    parser.add_argument("--reads", type=int, default=200)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    delays, readers = args.delay_ms or [0.0, 3.0], args.readers or [1, 16]
    results: list[dict[str, Any]] = []
    with durable_server() as server:
        dsn = server.fresh_database("reads")
        _seed(dsn)
        for delay in delays:
            with _proxied(dsn, delay) as through:
                for n in readers:
                    log(f"delay {delay} ms, {n} readers")
                    runs = asyncio.run(_sitting(through, n, args.reads, args.reps))
                    row = {"delay_ms": delay, "readers": n,
                           **{name: {k: median([r[k] for r in reps]) for k in reps[0]}
                              for name, reps in runs.items()}, "runs": runs}
                    results.append(row)
                    _print(row)
    if args.out:
        dump(args.out, {"when": now_stamp(), "machine": machine(), "load": os.getloadavg(), "args": vars(args)
                        | {"out": str(args.out)}, "rows": results})


def _print(row: dict[str, Any]) -> None:
    for name in ("threads", "asyncio"):
        r = row[name]
        print(f"{row['delay_ms']:>4} ms {row['readers']:>3} readers {name:>8}: "
              f"{r['reads_per_s']:8.0f} reads/s "
              f"p50 {r['p50_ms']:6.2f} p99 {r['p99_ms']:6.2f} ms  cpu {r['cpu_us_per_read']:6.0f} us/read  "
              f"loop late p99 {r['loop_late_p99_ms']:5.2f} ms", flush=True)
    print(f"      asyncio / threads reads/s "
          f"{row['asyncio']['reads_per_s'] / row['threads']['reads_per_s']:.2f}, "
          f"cpu {row['asyncio']['cpu_us_per_read'] / row['threads']['cpu_us_per_read']:.2f}", flush=True)


if __name__ == "__main__":
    main()
