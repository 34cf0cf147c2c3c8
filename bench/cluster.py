"""A cluster's figures: what forwarding costs per call, and how long a takeover takes after kill -9.

Both sides drive the runtime through the shipped asyncio client (``bench/driver.py``): through B
it is reattached by id (the same registry, so no new version) and serves nothing.

Two daemons form a cluster on one durable embedded PostgreSQL server (``pg_server``), each
with ``--advertise`` its own TCP address and a short lease. A runtime is created through
daemon A, which owns it and serves its worker. The same cycle (Spawn, Wake, Wait → pending,
Resume → done) is then driven through A directly and through B, which forwards each of the
four calls to A; repetitions alternate between the two so a burst of outside load falls on
both. The difference divided by four is the forwarding overhead per call.

Takeover: a runtime is created through A, A is killed with SIGKILL, and the clock runs until a
Snapshot through B succeeds — B (or its sweeper) has taken the runtime over and recovered it.
A is then restarted for the next round. The figure is bounded below by the lease: nobody may
take a runtime while its owner's lease is unexpired.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from toolnexus_client import Daemon as DaemonClient
from toolnexus_client import Unavailable

from .common import daemon, log, summary, tcp_target
from .driver import Daemon
from .pg_server import durable_server
from .scenarios import Profile

LEASE_MS = 2000
TAKEOVER_ROUNDS = 5
CALLS_PER_CYCLE = 4


def _member(base: Path, dsn: str, node: str) -> Any:
    return daemon(base, "--store", dsn, "--advertise", "127.0.0.1:0", "--node-id", node,
                  "--lease-ms", str(LEASE_MS), name=f"cl-{node}", unix=False)


async def _forwarding(target_a: str, target_b: str, prof: Profile) -> dict[str, Any]:
    owner = await Daemon.connect(target_a)
    via_b = await Daemon.connect(target_b, runtime_id=owner.runtime_id, worker=False)
    try:
        sides = {"direct": owner, "forwarded": via_b}
        for d in sides.values():
            for _ in range(prof.warmup):
                await d.cycle()
        reps: dict[str, list[float]] = {k: [] for k in sides}
        for rep in range(prof.reps):
            for name in (("direct", "forwarded") if rep % 2 == 0 else ("forwarded", "direct")):
                lat = []
                for _ in range(prof.cycles):
                    t0 = time.perf_counter()
                    await sides[name].cycle()
                    lat.append(time.perf_counter() - t0)
                reps[name].append(sorted(lat)[len(lat) // 2])
        out = {name: {"latency_ms": summary(v, 1e3)} for name, v in reps.items()}
        direct, fwd = out["direct"]["latency_ms"]["median"], out["forwarded"]["latency_ms"]["median"]
        out["forwarded_over_direct"] = round(fwd / direct, 2)
        out["overhead_per_call_ms"] = round((fwd - direct) / CALLS_PER_CYCLE, 3)
        return out
    finally:
        await owner.close()
        await via_b.close()


def _snapshot_until_served(target: str, rid: str, deadline_s: float = 60.0) -> float:
    """Seconds until a Snapshot of ``rid`` through ``target`` succeeds."""
    t0 = time.perf_counter()
    with DaemonClient(target) as client:
        while True:
            try:
                client.snapshot(rid, "root", timeout=5)
                return time.perf_counter() - t0
            except Unavailable:
                if time.perf_counter() - t0 > deadline_s:
                    raise
                time.sleep(0.01)


def _takeovers(base: Path, dsn: str, b_target: str) -> dict[str, Any]:
    seconds = []
    for round_ in range(TAKEOVER_ROUNDS):
        with _member(base, dsn, f"a{round_}") as a:
            async def create() -> str:
                d = await Daemon.connect(tcp_target(a), worker=False)
                await d.close()
                return d.runtime_id

            rid = asyncio.run(create())
            _snapshot_until_served(b_target, rid)  # B forwards to A: the runtime is A's
            a.kill9()
            seconds.append(_snapshot_until_served(b_target, rid))
        log(f"cl takeover round {round_}: {seconds[-1]:.3f} s")
    return {"seconds": summary(seconds), "lease_ms": LEASE_MS, "rounds": TAKEOVER_ROUNDS,
            "over_lease": round(sorted(seconds)[len(seconds) // 2] * 1000 / LEASE_MS, 2)}


def scenario_cluster(base: Path, prof: Profile) -> dict[str, Any]:
    with durable_server() as server:
        dsn = server.fresh_database("cluster")
        with _member(base, dsn, "a") as a, _member(base, dsn, "b") as b:
            res: dict[str, Any] = {"forwarding": asyncio.run(_forwarding(tcp_target(a), tcp_target(b), prof))}
            log(f"cl forwarding: {res['forwarding']}")
            res["takeover"] = _takeovers(base, dsn, tcp_target(b))
    log(f"cl takeover: {res['takeover']}")
    return res
