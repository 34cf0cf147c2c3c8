"""Scenario 5 (scale) and issue 4's parked-handle figures: cycles with N suspended handles parked.

Daemon: the parked handles are made through the daemon itself (Spawn, Wake,
Wait → pending, left suspended) by 64 concurrent asyncio clients, on a daemon
started with ``--no-sync`` so that creating 100,000 of them takes minutes,
not an hour; the state on disk is the same either way. Every measurement is
then taken on a fresh, **synced** daemon restarted on that data directory,
which also gives restart-to-SERVING time and the RSS of a daemon that holds
N parked handles. Levels grow in place (10, then 10,000, then 100,000).

Reference runtime: ``toolnexus.agents.AgentRuntime.resume`` answers the first
suspended handle it finds walking the tree, so it cannot keep other suspended
handles parked while a specific one is answered; its parked handles are N
idle handles spawned ahead of the measured ones, which its lookup walks past
on every resume (the cost the issue asks about). They are lighter than real
suspended handles, which favours the reference.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from toolnexus_client._gen import runtime_pb2 as pb

from . import peers
from .common import daemon, log, mib, rss, rss_split, summary, tcp_target
from .scenarios import Profile, _daemon_cycles
from .tnx_aio import Daemon, run_concurrent

RUNTIME_ID = "bench-scale"
PARK_LANES = 64


async def _park(target: str, count: int) -> float:
    """Park ``count`` more suspended handles; returns handles/s."""
    d = await Daemon.connect(target, runtime_id=RUNTIME_ID)
    try:
        elapsed = await run_concurrent(PARK_LANES, count, lambda i: d.park())
        return count / elapsed if elapsed > 0 else 0.0
    finally:
        await d.close()


async def _measure(target: str, prof: Profile) -> dict[str, Any]:
    d = await Daemon.connect(target, runtime_id=RUNTIME_ID)
    try:
        res = await _daemon_cycles(d, prof, cycles=prof.scale_cycles)
        info = await d.stub.Info(pb.InfoRequest(runtime_id=RUNTIME_ID), timeout=30)
        res["store_size_bytes"] = info.store_size_bytes
        return res
    finally:
        await d.close()


def daemon_scale(base: Path, prof: Profile, store_args: tuple[str, ...] = ()) -> dict[str, Any]:
    """The levels on one daemon state: LMDB under ``base``, or the database ``store_args`` names."""
    levels: dict[str, Any] = {}
    parked = 0
    for level in prof.scale_levels:
        with daemon(base, "--no-sync", *store_args, name="scale", unix=False, timeout=1800) as creator:
            t0 = time.perf_counter()
            rate = asyncio.run(_park(tcp_target(creator), level - parked))
            creation_s = time.perf_counter() - t0
            creator_rss = rss(creator.proc.pid)
        log(f"s5 parked {level - parked} more in {creation_s:.1f}s ({rate:.0f}/s), creator RSS {mib(creator_rss)} MiB")
        parked = level
        t0 = time.perf_counter()
        with daemon(base, *store_args, name="scale", unix=False, timeout=1800) as proc:
            restart_s = time.perf_counter() - t0
            rss_start = rss(proc.proc.pid)
            anon_start, file_start = rss_split(proc.proc.pid)
            res = asyncio.run(_measure(tcp_target(proc), prof))
            rss_end = rss(proc.proc.pid)
        res.update({"parked": level, "restart_to_serving_s": round(restart_s, 3),
                    "rss_after_restart_mib": mib(rss_start), "rss_after_cycles_mib": mib(rss_end),
                    "rss_after_restart_anon_mib": mib(anon_start), "rss_after_restart_file_mib": mib(file_start),
                    "creator_rss_mib": mib(creator_rss), "creation_per_s": round(rate, 1),
                    "creation_s": round(creation_s, 1)})
        levels[str(level)] = res
        log(f"s5 daemon @{level}: cycle {res['latency_ms']['median']} ms, resume "
            f"{res['phases_ms']['resume_done']} ms, restart {restart_s:.2f}s, RSS {mib(rss_start)} MiB")
    return levels


async def _reference_scale(prof: Profile) -> dict[str, Any]:
    out: dict[str, Any] = {}
    ref = peers.Reference()
    parked = 0
    for level in prof.scale_levels:
        ref.park_idle(level - parked)
        parked = level
        await peers.reference_cycles(prof.warmup, ref)
        reps = []
        for _ in range(prof.reps):
            reps.append(sorted(await peers.reference_cycles(prof.scale_cycles, ref))[prof.scale_cycles // 2])
        out[str(level)] = {"latency_ms": summary(reps, 1e3), "handles_in_tree": ref.count()}
        log(f"s5 reference @{level}: cycle {out[str(level)]['latency_ms']['median']} ms")
    return out


def scenario5(base: Path, prof: Profile) -> dict[str, Any]:
    out: dict[str, Any] = {"daemon": daemon_scale(base, prof), "reference": asyncio.run(_reference_scale(prof))}
    lo, hi = str(prof.scale_levels[0]), str(prof.scale_levels[-1])
    d_lo, d_hi = out["daemon"][lo], out["daemon"][hi]
    n = int(hi) - int(lo)
    out["summary"] = {
        "levels": [lo, hi],
        "cycle_ratio_hi_over_lo": round(d_hi["latency_ms"]["median"] / d_lo["latency_ms"]["median"], 2),
        "resume_ratio_hi_over_lo": round(d_hi["phases_ms"]["resume_done"] / d_lo["phases_ms"]["resume_done"], 2),
        "daemon_hi_over_reference_hi": round(d_hi["latency_ms"]["median"]
                                             / out["reference"][hi]["latency_ms"]["median"], 2),
        "lmdb_bytes_per_parked": round((d_hi["store_size_bytes"] - d_lo["store_size_bytes"]) / n, 1),
        "rss_growth_bytes_per_parked_after_restart": round(
            (d_hi["rss_after_restart_mib"] - d_lo["rss_after_restart_mib"]) * (1 << 20) / n, 1),
        "rss_anon_growth_bytes_per_parked_after_restart": _growth(d_lo, d_hi, "rss_after_restart_anon_mib", n),
        "rss_file_growth_bytes_per_parked_after_restart": _growth(d_lo, d_hi, "rss_after_restart_file_mib", n),
        "rss_growth_bytes_per_parked_creator": round(
            (d_hi["creator_rss_mib"] - d_lo["creator_rss_mib"]) * (1 << 20) / n, 1),
    }
    return out


def scenario_pg_scale(base: Path, prof: Profile) -> dict[str, Any]:
    """Issue 16: the same parked levels with the state in PostgreSQL (a durable embedded server):
    restart to SERVING, RSS and the cycle with N suspended handles parked in the database."""
    from .pg_server import durable_server

    with durable_server() as server:
        dsn = server.fresh_database("scale")
        levels = daemon_scale(base / "pg", prof, store_args=("--store", dsn))
    hi = levels[str(prof.scale_levels[-1])]
    return {"daemon": levels, "summary": {"parked": prof.scale_levels[-1],
                                          "restart_to_serving_s": hi["restart_to_serving_s"],
                                          "rss_after_restart_mib": hi["rss_after_restart_mib"]}}


def _growth(lo: dict[str, Any], hi: dict[str, Any], field: str, n: int) -> float | None:
    if field not in lo or field not in hi:
        return None
    return round((hi[field] - lo[field]) * (1 << 20) / n, 1)
