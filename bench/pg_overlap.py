"""PostgreSQL a network away: do round trips of many runtimes overlap, and does the event loop stay free?

One durable embedded PostgreSQL server (``pg_server.DurablePg``, unix socket) behind
a delaying proxy (``tests/support/stall_proxy.StallProxyProcess`` with ``delay``: every chunk
passed on ``delay`` after it arrived, each way, so a round trip costs twice the delay
however many are in flight). The proxy runs in a process of its own, started and stopped
with each daemon, so its delay is not stretched by waiting for this process's GIL while
the 16 clients run (``--proxy-thread``: in a thread of this process, as before); how late
it passed chunks on during the 16-client run is reported (``proxy_late_p50_ms`` …). One
daemon on that database; the cycle is the bench's
(spawn, wake, wait → pending, resume → done: a model call, a tool call that suspends,
the answer, a model call). Measured, per delay:

* one client, sequential: cycles/s;
* 16 clients at once, each on its own runtime (own channel, own worker stream): cycles/s
  and the speed-up over one client;
* during the 16-client run, a gRPC health ``Check`` every 50 ms on its own channel: its
  latency p50 / p99 (what every RPC waits behind when the event loop is held);
* where the CPU of the 16-client run went, per cycle (``/proc``): the daemon (its event loop
  apart from its other threads), this process's clients, the proxy, the database
  server's processes, and the whole machine in cores busy (``others_cores_busy``: what other
  processes took meanwhile); from the daemon's metrics endpoint, the changes and write
  transactions per cycle and a commit's mean time in the store.

``--direct`` adds a run with no proxy at all, the daemon on the server's own socket: what 16
clients reach when a round trip costs nothing, an upper bound on what any overlap of round trips
can give at a delay (a delay only adds the proxy's CPU and the waits).

``--fused`` runs the fused cycle (Spawn with the prompt and a wait, then Resume).

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
import contextlib
import json
import os
import socket
import statistics
import sys
import threading
import time
import urllib.request
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
from grpc import aio
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.support.daemon import DaemonProcess
from tests.support.stall_proxy import StallProxy, StallProxyProcess

from .common import log, portable_argv, workdir
from .cpu import thread_cpu
from .driver import Daemon
from .pg_server import durable_server

PROBE_EVERY_S = 0.05


FUSED = False  # --fused: the cycle in two RPCs (Spawn with prompt and wait, Resume)


def _cycle(d: Daemon) -> Awaitable[str]:
    return d.fused_cycle() if FUSED else d.cycle()


async def _one_client(target: str, cycles: int) -> float:
    d = await Daemon.connect(target)
    try:
        await _cycle(d)  # warm-up: the runtime's first turn
        started = time.perf_counter()
        for _ in range(cycles):
            await _cycle(d)
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
        await asyncio.gather(*(_cycle(d) for d in ds))  # warm-up
        stop, probes = asyncio.Event(), []
        probe = asyncio.create_task(_probe(target, stop, probes))

        async def run(d: Daemon) -> None:
            for _ in range(cycles):
                await _cycle(d)

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


Proxy = StallProxy | StallProxyProcess


def _measure(tree: Path, dsn: str | None, base: Path, name: str, clients: int, cycles: int,
             server_pid: int | None = None, proxy: Proxy | None = None) -> dict[str, Any]:
    env = {"PYTHONPATH": f"{tree}:{tree / 'clients' / 'python'}"}
    metrics = f"127.0.0.1:{_free_port()}"
    proc = DaemonProcess(base / name, *(("--store", dsn) if dsn else ()), "--metrics-listen", metrics,
                         env=env, cwd=tree)
    proc.start(timeout=120)
    try:
        target = proc.target
        one = asyncio.run(_one_client(target, cycles))
        assert proc.proc is not None
        proxy_pid = proxy.pid if isinstance(proxy, StallProxyProcess) else None
        before = _Counters.read(proc.proc.pid, server_pid, metrics, proxy_pid)
        if proxy is not None:
            proxy.late()  # from here on: the 16-client run's chunks
        many, probes = asyncio.run(_many_clients(target, clients, cycles))
        spent = _Counters.read(proc.proc.pid, server_pid, metrics, proxy_pid).minus(before)
        late = proxy.late() if proxy is not None else {}
    finally:
        proc.stop(timeout=60)
    done = clients * (cycles + 1)  # with the warm-up cycle
    per_cycle = spent.per_cycle(done)
    return {"one": one, "many": many, "speedup": many / one, "probe_p50_ms": _pct(probes, 0.5),
            "probe_p99_ms": _pct(probes, 0.99), "probes": len(probes), **per_cycle,
            **ceilings(per_cycle, one),
            **{f"proxy_late_{k}": v for k, v in late.items() if k != "count"}}


def ceilings(per_cycle: dict[str, float], one: float) -> dict[str, float]:
    """The most cycles/s this run's CPU per cycle allows, and the 16 / one ratio that would be.

    ``loop``: the daemon's event loop is one thread, so its CPU per cycle gets at most one core
    (an upper bound: the store's reader threads need the same GIL too, and are not counted);
    ``machine``: the daemon, the clients, the proxy and the database server together get at most
    every core of the machine (nothing else running). Whichever is lower bounds the 16-client
    rate, whatever the round trips' overlap: a speed-up goal above ``ceiling_speedup`` needs less
    CPU per cycle, not more overlap.
    """
    loop_ms = per_cycle.get("daemon_loop_cpu_ms_per_cycle", 0.0)
    ours_ms = sum(per_cycle.get(k, 0.0) for k in ("daemon_cpu_ms_per_cycle", "client_cpu_ms_per_cycle",
                                                  "proxy_cpu_ms_per_cycle", "server_cpu_ms_per_cycle"))
    loop = 1000 / loop_ms if loop_ms else float("inf")
    machine = (os.cpu_count() or 1) * 1000 / ours_ms if ours_ms else float("inf")
    best = min(loop, machine)
    return {"ceiling_loop_cycles_per_s": loop, "ceiling_machine_cycles_per_s": machine,
            "ceiling_speedup": best / one if one else 0.0}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# the daemon's threads by what they do (``/proc/<pid>/task/*/comm``, a name cut to 15 characters)
THREAD_GROUPS = (("main", "loop"), ("pg-commit", "commit"), ("pg-read", "read"), ("commit", "commit"),
                 ("grpc", "grpc"))
# the committer's and the store's totals on the metrics endpoint
SCRAPED = {"toolnexus_store_group_commit_batches": "changes",
           "toolnexus_store_group_commit_transactions": "transactions",
           "toolnexus_store_commit_duration_seconds_sum": "commit_s",
           "toolnexus_store_commit_duration_seconds_count": "commits"}


@dataclass
class _Counters:
    """Where the CPU of a run went (the daemon's threads by group, the database server's processes,
    this process's client loop and proxy thread) and what the committer did, as totals so far."""

    values: dict[str, float]

    @classmethod
    def read(cls, pid: int, server_pid: int | None, metrics: str, proxy_pid: int | None = None) -> _Counters:
        values: dict[str, float] = {"daemon_cpu": _cpu_seconds(pid), "client_cpu": time.process_time()}
        for thread, seconds in thread_cpu(pid).items():
            group = next((g for prefix, g in THREAD_GROUPS if thread.startswith(prefix)), "other")
            values[f"daemon_{group}_cpu"] = values.get(f"daemon_{group}_cpu", 0.0) + seconds
        if proxy_pid is None:
            values["proxy_cpu"] = _proxy_cpu()
        else:  # a process of its own: counted apart from this one's and added to what ran
            values["proxy_process_cpu"] = values["proxy_cpu"] = _cpu_seconds(proxy_pid)
        values["wall"] = time.perf_counter()
        values["machine_busy"], values["machine_all"] = _machine_ticks()
        if server_pid is not None:
            values["server_cpu"] = _tree_cpu(server_pid)
        values.update(_scrape(metrics))
        return cls(values)

    def minus(self, before: _Counters) -> _Counters:
        return _Counters({k: v - before.values.get(k, 0.0) for k, v in self.values.items()})

    def per_cycle(self, done: int) -> dict[str, float]:
        v = self.values
        out = {f"{k}_ms_per_cycle": v[k] * 1000 / done for k in sorted(v) if k.endswith("_cpu")}
        if "proxy_process_cpu" not in v:  # the proxy thread's CPU apart from the clients'
            out["client_cpu_ms_per_cycle"] -= v.get("proxy_cpu", 0.0) * 1000 / done
        out.pop("proxy_process_cpu_ms_per_cycle", None)
        if v.get("transactions"):
            out["changes_per_cycle"] = v["changes"] / done
            out["transactions_per_cycle"] = v["transactions"] / done
            out["changes_per_transaction"] = v["changes"] / v["transactions"]
        if v.get("commits"):
            out["commit_ms"] = v["commit_s"] * 1000 / v["commits"]
        # the whole machine during the run, in cores busy: this run's processes and everyone else's
        cores = os.cpu_count() or 1
        out["machine_cores_busy"] = cores * v["machine_busy"] / v["machine_all"] if v["machine_all"] else 0.0
        ours = sum(v.get(k, 0.0) for k in ("daemon_cpu", "client_cpu", "server_cpu", "proxy_process_cpu"))
        out["others_cores_busy"] = out["machine_cores_busy"] - ours / v["wall"]
        return out


def _machine_ticks() -> tuple[float, float]:
    """Busy and all CPU ticks of the machine so far (``/proc/stat``, every core; idle and iowait
    are not busy)."""
    fields = [float(f) for f in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return sum(fields) - fields[3] - fields[4], sum(fields)


def _proxy_cpu() -> float:
    """CPU seconds of this process's proxy threads (``StallProxy`` names them ``stall-proxy``)."""
    by_id = {t.native_id: t.name for t in threading.enumerate()}
    total = 0.0
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        if by_id.get(int(task.name)) == "stall-proxy":
            with contextlib.suppress(OSError):
                fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
                total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def _tree_cpu(pid: int) -> float:
    """User + system CPU of ``pid`` and its live children (the server's postmaster and backends)."""
    total = 0.0
    try:
        root = psutil.Process(pid)
        for p in (root, *root.children(recursive=True)):
            with contextlib.suppress(psutil.Error):
                t = p.cpu_times()
                total += t.user + t.system
    except psutil.Error:
        pass
    return total


def _scrape(address: str) -> dict[str, float]:
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=10) as response:
        text = response.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name in SCRAPED:
            out[SCRAPED[name]] = float(value)
    return out


def _cpu_seconds(pid: int) -> float:
    """User + system CPU of a process so far (``/proc/<pid>/stat``, Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _reps(trees: dict[str, str], args: argparse.Namespace,
          store_for: Callable[[str, int], tuple[str | None, Proxy | None]], base: Path,
          label: str, server_pid: int | None = None) -> dict[str, list[dict[str, Any]]]:
    """Every tree ``args.reps`` times, the order rotated each repetition (who goes first alternates)."""
    by_tree: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
    for rep in range(args.reps):
        names = list(trees)
        names = names[rep % len(names):] + names[:rep % len(names)]
        for name in names:
            dsn, proxy = store_for(name, rep)
            try:
                fig = _measure(Path(trees[name]).resolve(), dsn, base, f"{name}-{label}-{rep}",
                               args.clients, args.cycles, server_pid, proxy)
            finally:
                if proxy is not None:
                    proxy.close()
            log(f"{label} {name} rep {rep}: {json.dumps(fig)}")
            by_tree[name].append(fig)
    return by_tree


def _direct_bounds(summary: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Per delay and tree: 16 clients with no proxy / one client at that delay, the most 16 / one
    could be there if every round trip overlapped perfectly and cost no CPU."""
    direct = summary["direct"]
    return {delay: {name: direct[name]["many"] / fig["one"] for name, fig in trees.items()
                    if name in direct and fig["one"]}
            for delay, trees in summary.items() if delay != "direct"}


def _postmaster(pgdata: Path) -> int:
    """The server's postmaster pid (the first line of ``postmaster.pid``)."""
    return int((pgdata / "postmaster.pid").read_text().split()[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--delay-ms", type=float, action="append", help="one way (repeatable; default 3)")
    parser.add_argument("--tree", action="append", default=[], help="name=path of a checkout (repeatable)")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--cycles", type=int, default=20, help="cycles per client per repetition")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--lmdb", action="store_true", help="the daemon on synced LMDB instead (no proxy)")
    parser.add_argument("--proxy-thread", action="store_true",
                        help="the proxy in a thread of this process (sharing its GIL with the clients), "
                             "not a process of its own")
    parser.add_argument("--direct", action="store_true",
                        help="also run with no proxy at all (the daemon on the server's socket): the most "
                             "16 clients can do on this machine when round trips cost nothing")
    parser.add_argument("--fused", action="store_true",
                        help="the fused cycle (Spawn with prompt and wait, then Resume: 2 RPCs instead of 4)")
    args = parser.parse_args()
    global FUSED
    FUSED = args.fused
    trees = dict(t.split("=", 1) for t in args.tree) or {"this": "."}
    results: dict[str, Any] = {}
    if args.lmdb:  # the same runs on synced LMDB in the data dir: no database, no proxy
        with workdir("tnx-pgo-") as base:
            results["lmdb"] = _reps(trees, args, lambda name, rep: (None, None), base, "lmdb")
    else:
        with durable_server() as pg, workdir("tnx-pgo-") as base:
            if args.direct:
                def no_proxy(name: str, rep: int) -> tuple[str, None]:
                    return pg.fresh_database(f"pgo_{name}_{rep}"), None

                results["direct"] = _reps(trees, args, no_proxy, base, "direct", _postmaster(pg.pgdata))
            for delay in args.delay_ms or [3.0]:
                def through_proxy(name: str, rep: int, delay: float = delay) -> tuple[str, Proxy]:
                    dsn = pg.fresh_database(f"pgo_{name}_{rep}")
                    kind = StallProxy if args.proxy_thread else StallProxyProcess
                    proxy, slow = kind.for_dsn(dsn, delay=delay / 1000)
                    return slow, proxy

                results[f"{delay:g}ms"] = _reps(trees, args, through_proxy, base, f"{delay:g}ms",
                                                _postmaster(pg.pgdata))
    summary = {delay: {name: {k: statistics.median(r[k] for r in reps) for k in reps[0]}
                       for name, reps in trees_of.items()} for delay, trees_of in results.items()}
    if "direct" in summary:
        summary["bound_from_direct"] = _direct_bounds(summary)
    print(json.dumps(summary, indent=1))
    if args.out:
        args.out.write_text(json.dumps({"runs": results, "median": summary, "argv": portable_argv(sys.argv),
                                        "pid": os.getpid(), "load_average": os.getloadavg()}, indent=1))


if __name__ == "__main__":
    main()
