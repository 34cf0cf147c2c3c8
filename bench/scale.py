"""Scenario 5 (scale) and the parked-handle figures: cycles with N suspended handles parked.

Daemon: the parked handles are made through the daemon itself (Spawn, Wake,
Wait → pending, left suspended) by 64 concurrent asyncio clients, on a daemon
started with ``--no-sync`` so that creating 100,000 of them takes minutes,
not an hour; the state on disk is the same either way. Each level is parked
in a store of its own; then every level is restarted as a **synced** daemon
(restart-to-SERVING time, the RSS of a daemon that holds N parked handles)
and they run side by side, their cycles interleaved round by round
(bench/interleave.py), so the ratio between levels is taken within each
repetition: the quick run's figure measured one level after the other and
swung 0.13–3.41 between runs of one sitting as other sessions' fsyncs came
and went.

Reference runtime: ``toolnexus.agents.AgentRuntime.resume`` answers the first
suspended handle it finds walking the tree, so it cannot keep other suspended
handles parked while a specific one is answered; its parked handles are N
idle handles spawned ahead of the measured ones, which its lookup walks past
on every resume (the cost the issue asks about). They are lighter than real
suspended handles, which favours the reference.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from toolnexus_client import Info

from . import interleave, peers
from .common import daemon, log, mib, rss, rss_split, summary, tcp_target
from .driver import Daemon, run_concurrent
from .scenarios import Profile

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


def _park_level(base: Path, level: int, store_args: tuple[str, ...]) -> dict[str, Any]:
    """Park ``level`` handles in the store of this level (its own data dir or database)."""
    with daemon(base, "--no-sync", *store_args, name=f"scale-{level}", unix=False, timeout=1800) as creator:
        t0 = time.perf_counter()
        rate = asyncio.run(_park(tcp_target(creator), level))
        creation_s = time.perf_counter() - t0
        creator_rss = rss(creator.proc.pid)
    log(f"s5 parked {level} in {creation_s:.1f}s ({rate:.0f}/s), creator RSS {mib(creator_rss)} MiB")
    return {"parked": level, "creator_rss_mib": mib(creator_rss), "creation_per_s": round(rate, 1),
            "creation_s": round(creation_s, 1)}


def daemon_scale(base: Path, prof: Profile,
                 store_for: Callable[[int], tuple[str, ...]] | None = None) -> dict[str, Any]:
    """Every level parked in a store of its own (a data dir under ``base``, or the database
    ``store_for(level)`` names), then all levels restarted synced side by side and their cycles
    interleaved round by round (bench/interleave.py): the ratio between levels is taken within each
    repetition, so a window of slow fsyncs from other sessions falls on every level alike."""
    args = {level: store_for(level) if store_for else () for level in prof.scale_levels}
    levels = {str(level): _park_level(base, level, args[level]) for level in prof.scale_levels}
    loop = asyncio.new_event_loop()
    probe = interleave.CommitProbe(base / "scale-probe")
    try:
        with contextlib.ExitStack() as stack:
            procs = {}
            for level in prof.scale_levels:
                t0 = time.perf_counter()
                procs[str(level)] = proc = stack.enter_context(
                    daemon(base, *args[level], name=f"scale-{level}", unix=False, timeout=1800))
                anon, file = rss_split(proc.proc.pid)
                levels[str(level)].update({"restart_to_serving_s": round(time.perf_counter() - t0, 3),
                                           "rss_after_restart_mib": mib(rss(proc.proc.pid)),
                                           "rss_after_restart_anon_mib": mib(anon),
                                           "rss_after_restart_file_mib": mib(file)})
            ds = {k: interleave.on_loop(loop, Daemon.connect(tcp_target(p), runtime_id=RUNTIME_ID))
                  for k, p in procs.items()}
            try:
                res = interleave.run({k: interleave.aio_variant(loop, d) for k, d in ds.items()},
                                     warmup=prof.warmup, reps=prof.interleaved_reps, cycles=prof.scale_cycles,
                                     probe=probe, label="s5")
                for k, d in ds.items():
                    info = interleave.on_loop(loop, _info(d))
                    levels[k].update(interleave.figure(res, k), store_size_bytes=info.store_size_bytes,
                                     rss_after_cycles_mib=mib(rss(procs[k].proc.pid)))
            finally:
                for d in ds.values():
                    interleave.on_loop(loop, d.close())
    finally:
        probe.close()
        loop.close()
    for k, r in levels.items():
        log(f"s5 daemon @{k}: cycle {r['latency_ms']['median']} ms, "
            f"resume {r['phases_ms']['resume_done']} ms, restart {r['restart_to_serving_s']}s, "
            f"RSS {r['rss_after_restart_mib']} MiB")
    lo, hi = str(prof.scale_levels[0]), str(prof.scale_levels[-1])
    levels["interleaved"] = {"reps": prof.interleaved_reps, "cycles_per_rep": prof.scale_cycles,
                             "cycle_hi_over_lo": interleave.paired_ratio(res, hi, lo),
                             "resume_hi_over_lo": _paired_phase(res, hi, lo, "resume_done"),
                             "commit_probe_ms": summary(res["commit_probe_ms"], 1.0, 3)}
    return levels


async def _info(d: Daemon) -> Info:
    return await d.info()


def _paired_phase(res: dict[str, Any], num: str, den: str, phase: str) -> dict[str, Any]:
    a, b = res["phases_s"][num][phase], res["phases_s"][den][phase]
    return summary([x / y for x, y in zip(a, b, strict=True)], 1.0, 3)


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
    levels = daemon_scale(base, prof)
    paired = levels.pop("interleaved")
    out: dict[str, Any] = {"daemon": levels, "interleaved": paired,
                           "reference": asyncio.run(_reference_scale(prof))}
    lo, hi = str(prof.scale_levels[0]), str(prof.scale_levels[-1])
    d_lo, d_hi = out["daemon"][lo], out["daemon"][hi]
    n = int(hi) - int(lo)
    out["summary"] = {
        "levels": [lo, hi],
        # per-repetition ratios of interleaved cycles (same seconds, same disk weather), then the median
        "cycle_ratio_hi_over_lo": round(paired["cycle_hi_over_lo"]["median"], 2),
        "resume_ratio_hi_over_lo": round(paired["resume_hi_over_lo"]["median"], 2),
        "daemon_hi_over_reference_hi": round(d_hi["latency_ms"]["median"]
                                             / out["reference"][hi]["latency_ms"]["median"], 2),
        "lmdb_bytes_per_parked": round((d_hi["store_size_bytes"] - d_lo["store_size_bytes"]) / n, 1),
        "rss_growth_bytes_per_parked_after_restart": round(
            (d_hi["rss_after_restart_mib"] - d_lo["rss_after_restart_mib"]) * (1 << 20) / n, 1),
        "rss_anon_growth_bytes_per_parked_after_restart": _growth(
            d_lo, d_hi, "rss_after_restart_anon_mib", n),
        "rss_file_growth_bytes_per_parked_after_restart": _growth(
            d_lo, d_hi, "rss_after_restart_file_mib", n),
        "rss_growth_bytes_per_parked_creator": round(
            (d_hi["creator_rss_mib"] - d_lo["creator_rss_mib"]) * (1 << 20) / n, 1),
    }
    return out


def scenario_pg_scale(base: Path, prof: Profile) -> dict[str, Any]:
    """The same parked levels with the state in PostgreSQL (a durable embedded server):
    restart to SERVING, RSS and the cycle with N suspended handles parked in the database."""
    from .pg_server import durable_server

    with durable_server() as server:
        levels = daemon_scale(base / "pg", prof,
                              store_for=lambda level: ("--store", server.fresh_database(f"scale{level}")))
    levels.pop("interleaved")
    hi = levels[str(prof.scale_levels[-1])]
    return {"daemon": levels, "summary": {"parked": prof.scale_levels[-1],
                                          "restart_to_serving_s": hi["restart_to_serving_s"],
                                          "rss_after_restart_mib": hi["rss_after_restart_mib"]}}


def _growth(lo: dict[str, Any], hi: dict[str, Any], field: str, n: int) -> float | None:
    if field not in lo or field not in hi:
        return None
    return round((hi[field] - lo[field]) * (1 << 20) / n, 1)
