"""PostgreSQL a network away: do round trips of many runtimes overlap, and does the event loop stay free?

One durable embedded PostgreSQL server (``pg_server.DurablePg``, unix socket) behind
a delaying proxy (``tests/support/stall_proxy.StallProxy`` with ``delay``: every chunk
passed on ``delay`` after it arrived, each way, so a round trip costs twice the delay
however many are in flight). One daemon on that database; the cycle is the bench's
(spawn, wake, wait → pending, resume → done: a model call, a tool call that suspends,
the answer, a model call). Measured, per delay:

* one client, sequential: cycles/s;
* 16 clients at once, each on its own runtime (own channel, own worker stream): cycles/s
  and the speed-up over one client;
* during the 16-client run, a gRPC health ``Check`` every 50 ms on its own channel: its
  latency p50 / p99 (what every RPC waits behind when the event loop is held).

``--lmdb`` runs the same on synced LMDB (no database, no proxy): the cycle there must not
get slower. ``--tree`` runs the daemon from another checkout (``PYTHONPATH`` of the daemon only), so
the same run compares main with this branch, alternating repetitions::

    .venv/bin/python -m bench.pg_overlap --delay-ms 3 --tree before=../checkout-before --tree after=.

Every loop is bounded by a count; the proxy and the servers listen on unix sockets and
127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from grpc import aio
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.support.daemon import DaemonProcess
from tests.support.stall_proxy import StallProxy

from .common import log, workdir
from .driver import Daemon
from .pg_server import durable_server

PROBE_EVERY_S = 0.05


async def _one_client(target: str, cycles: int) -> float:
    d = await Daemon.connect(target)
    try:
        await d.cycle()  # warm-up: the runtime's first turn
        started = time.perf_counter()
        for _ in range(cycles):
            await d.cycle()
        return cycles / (time.perf_counter() - started)
    finally:
        await d.close()


async def _probe(target: str, stop: asyncio.Event, out: list[float]) -> None:
    async with aio.insecure_channel(target) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        await stub.Check(health_pb2.HealthCheckRequest(), timeout=10)
        for _ in range(100_000):  # bounded; ends with the run
            if stop.is_set():
                return
            started = time.perf_counter()
            await stub.Check(health_pb2.HealthCheckRequest(), timeout=10)
            out.append(time.perf_counter() - started)
            await asyncio.sleep(PROBE_EVERY_S)


async def _many_clients(target: str, clients: int, cycles: int) -> tuple[float, list[float]]:
    ds = await asyncio.gather(*(Daemon.connect(target) for _ in range(clients)))
    try:
        await asyncio.gather(*(d.cycle() for d in ds))  # warm-up
        stop, probes = asyncio.Event(), []
        probe = asyncio.create_task(_probe(target, stop, probes))

        async def run(d: Daemon) -> None:
            for _ in range(cycles):
                await d.cycle()

        started = time.perf_counter()
        await asyncio.gather(*(run(d) for d in ds))
        elapsed = time.perf_counter() - started
        stop.set()
        await probe
        return clients * cycles / elapsed, probes
    finally:
        await asyncio.gather(*(d.close() for d in ds))


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000 if ordered else 0.0


def _measure(tree: Path, dsn: str | None, base: Path, name: str, clients: int, cycles: int) -> dict[str, Any]:
    env = {"PYTHONPATH": f"{tree}:{tree / 'clients' / 'python'}"}
    proc = DaemonProcess(base / name, *(("--store", dsn) if dsn else ()), env=env, cwd=tree)
    proc.start(timeout=120)
    try:
        target = proc.target
        one = asyncio.run(_one_client(target, cycles))
        assert proc.proc is not None
        cpu, own = _cpu_seconds(proc.proc.pid), time.process_time()
        many, probes = asyncio.run(_many_clients(target, clients, cycles))
        cpu, own = _cpu_seconds(proc.proc.pid) - cpu, time.process_time() - own
    finally:
        proc.stop(timeout=60)
    done = clients * (cycles + 1)  # with the warm-up cycle
    return {"one": one, "many": many, "speedup": many / one, "probe_p50_ms": _pct(probes, 0.5),
            "probe_p99_ms": _pct(probes, 0.99), "probes": len(probes),
            "daemon_cpu_ms_per_cycle": cpu * 1000 / done, "client_cpu_ms_per_cycle": own * 1000 / done}


def _cpu_seconds(pid: int) -> float:
    """User + system CPU of a process so far (``/proc/<pid>/stat``, Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _reps(trees: dict[str, str], args: argparse.Namespace,
          store_for: Callable[[str, int], tuple[str | None, StallProxy | None]], base: Path,
          label: str) -> dict[str, list[dict[str, Any]]]:
    """Every tree ``args.reps`` times, the order rotated each repetition (who goes first alternates)."""
    by_tree: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
    for rep in range(args.reps):
        names = list(trees)
        names = names[rep % len(names):] + names[:rep % len(names)]
        for name in names:
            dsn, proxy = store_for(name, rep)
            try:
                fig = _measure(Path(trees[name]).resolve(), dsn, base, f"{name}-{label}-{rep}",
                               args.clients, args.cycles)
            finally:
                if proxy is not None:
                    proxy.close()
            log(f"{label} {name} rep {rep}: {json.dumps(fig)}")
            by_tree[name].append(fig)
    return by_tree


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--delay-ms", type=float, action="append", help="one way (repeatable; default 3)")
    parser.add_argument("--tree", action="append", default=[], help="name=path of a checkout (repeatable)")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--cycles", type=int, default=20, help="cycles per client per repetition")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--lmdb", action="store_true", help="the daemon on synced LMDB instead (no proxy)")
    args = parser.parse_args()
    trees = dict(t.split("=", 1) for t in args.tree) or {"this": "."}
    results: dict[str, Any] = {}
    if args.lmdb:  # the same runs on synced LMDB in the data dir: no database, no proxy
        with workdir("tnx-pgo-") as base:
            results["lmdb"] = _reps(trees, args, lambda name, rep: (None, None), base, "lmdb")
    else:
        with durable_server() as pg, workdir("tnx-pgo-") as base:
            for delay in args.delay_ms or [3.0]:
                def through_proxy(name: str, rep: int, delay: float = delay) -> tuple[str, StallProxy]:
                    dsn = pg.fresh_database(f"pgo_{name}_{rep}")
                    proxy, slow = StallProxy.for_dsn(dsn, delay=delay / 1000)
                    return slow, proxy

                results[f"{delay:g}ms"] = _reps(trees, args, through_proxy, base, f"{delay:g}ms")
    summary = {delay: {name: {k: statistics.median(r[k] for r in reps) for k in reps[0]}
                       for name, reps in trees_of.items()} for delay, trees_of in results.items()}
    print(json.dumps(summary, indent=1))
    if args.out:
        args.out.write_text(json.dumps({"runs": results, "median": summary, "argv": sys.argv,
                                        "pid": os.getpid()}, indent=1))


if __name__ == "__main__":
    main()
