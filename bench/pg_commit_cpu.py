"""The daemon's CPU per PostgreSQL commit: ``PgStore.commit`` alone, 16 runtimes committing at once.

No daemon, no gRPC, no delay: one process opens ``PgStore`` (its default commit lanes) on a
fresh database of the durable embedded server (``pg_server``) and 16 coroutines each commit
a batch of the cycle's shape again and again (three handles, two transcript messages, two
checkpoints, a request entry, four events, the runtime's lease fence: 13 rows in 6 tables).
Reported per repetition: the process's CPU (user + system, every thread) per commit, and
commits per second. ``--tree`` takes ``toolnexus_daemon`` from another checkout, so two
versions of the store compare on one server::

    .venv/bin/python -m bench.pg_commit_cpu --tree ../checkout-before
    .venv/bin/python -m bench.pg_commit_cpu

Every loop is bounded by a count; the server listens on a unix socket only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

import psycopg

from .common import portable_argv
from .pg_server import durable_server

CLIENTS = 16
LEASE = ("INSERT INTO tn_leases (rid, owner, address, epoch, expires_at, incarnation) "
         "VALUES (%s, 'bench', '', 1, now() + interval '1 hour', 'i1')")


def _batch(rid: str, n: int) -> Any:
    from toolnexus_daemon.model import Event
    from toolnexus_daemon.store import Batch
    from toolnexus_daemon.store.base import Fence

    b = Batch()
    for k in range(3):
        b.handles[(rid, f"h{k}")] = {"id": f"h{k}", "state": "suspended", "n": n, "text": "x" * 400}
    b.messages += [(rid, "h0", n * 2, {"role": "user", "content": "hi" * 100}),
                   (rid, "h0", n * 2 + 1, {"role": "assistant", "content": "ok" * 100})]
    b.checkpoints[(rid, "h0")] = {"step": n, "blob": "c" * 300}
    b.checkpoints[(rid, "h1")] = {"step": n, "blob": "c" * 300}
    b.requests[(rid, f"q{n}")] = {"handle": "h0"}
    b.events += [Event(seq=n * 4 + i + 1, runtime_id=rid, handle="h0", type="state", note="n",
                       at="2026-01-01T00:00:00Z") for i in range(4)]
    b.fences.append(Fence(runtime_id=rid, owner="bench", epoch=1, incarnation="i1"))
    return b


async def _run(dsn: str, commits: int) -> dict[str, float]:
    from toolnexus_daemon.store.postgres.store import PgStore

    store = PgStore(dsn)
    with psycopg.connect(dsn, autocommit=True) as conn:
        for i in range(CLIENTS):
            conn.execute(LEASE, (f"r{i}",))

    async def one(i: int, count: int, start: int) -> None:
        for n in range(start, start + count):
            await store.commit(_batch(f"r{i}", n), i % store.commit_lanes)

    try:
        await asyncio.gather(*(one(i, 10, 0) for i in range(CLIENTS)))  # connections opened, statements known
        each = max(commits // CLIENTS, 1)
        cpu, wall = time.process_time(), time.perf_counter()
        await asyncio.gather(*(one(i, each, 10) for i in range(CLIENTS)))
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    finally:
        store.close()
    return {"cpu_ms_per_commit": cpu * 1000 / (each * CLIENTS), "commits_per_s": each * CLIENTS / wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tree", type=Path, default=None, help="take toolnexus_daemon from this checkout")
    parser.add_argument("--commits", type=int, default=1600)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    if args.tree is not None:
        sys.path.insert(0, str(args.tree.resolve()))
    with durable_server() as pg:
        reps = [asyncio.run(_run(pg.fresh_database(f"cpu{rep}"), args.commits)) for rep in range(args.reps)]
    import toolnexus_daemon

    store_from = portable_argv([str(Path(toolnexus_daemon.__file__).parent)])[0]
    print(json.dumps({"store_from": store_from, "reps": reps}))


if __name__ == "__main__":
    main()
