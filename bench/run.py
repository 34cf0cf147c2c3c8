"""Run the benchmarks, write ``bench/results/<date>[-quick].json`` and the table in ``bench/README.md``.

    python -m bench.run            # everything (make bench)
    python -m bench.run --quick    # fewer repetitions, scale up to 1,000 parked (make bench-quick)
    python -m bench.run --only s1,s3,s4
    python -m bench.run --render bench/results/<file>.json   # re-render a results file into the README

Scenarios run in this order so a partial run still answers the main question:
s1 (cycle, sequential), s4 (floors), s3 (peers: LangGraph+SQLite in both durability modes, single
and 16 threads), s2 (16 clients: the bench driver, then the shipped asyncio client), s5 (scale),
s6 (slow model), tr (transitions/s), pg (the daemon on PostgreSQL
beside LMDB and LangGraph + PostgresSaver), pgd (the commit with psycopg vs
asyncpg), pgs (restart and cycle with the s5 levels parked in
PostgreSQL), cl (forwarding overhead and takeover time in a cluster). The JSON is rewritten after
each scenario; the README table is written at the end (``--no-readme`` skips it).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path
from typing import Any

from . import cluster, pg, pg_driver, report, scale, scenarios
from .common import ROOT, dump, log, machine, now_stamp, workdir

ORDER = ("s1", "s4", "s3", "s2", "s5", "s6", "tr", "pg", "pgd", "pgs", "cl")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.run")
    p.add_argument("--quick", action="store_true", help="the short profile (under 3 minutes)")
    p.add_argument("--only", default="", help=f"comma-separated subset of {','.join(ORDER)}")
    p.add_argument("--scale-levels", default="", metavar="N,N,...",
                   help="parked-handle levels of s5 (default 10,10000,100000; quick 10,1000)")
    p.add_argument("--out", type=Path, default=None, help="results JSON path")
    p.add_argument("--no-readme", action="store_true", help="do not rewrite the table in bench/README.md")
    p.add_argument("--render", type=Path, default=None, metavar="JSON",
                   help="only re-render a results file into bench/README.md (goals recomputed)")
    ns = p.parse_args(argv)
    if ns.render is not None:
        return rerender(ns.render)
    prof = scenarios.QUICK if ns.quick else scenarios.FULL
    if ns.scale_levels:
        levels = tuple(int(x) for x in ns.scale_levels.split(",") if x)
        if len(levels) < 2 or list(levels) != sorted(levels):
            p.error("--scale-levels needs at least two ascending counts")
        prof = dataclasses.replace(prof, scale_levels=levels)
    only = [s for s in ns.only.split(",") if s] or list(ORDER)
    unknown = sorted(set(only) - set(ORDER))
    if unknown:
        p.error(f"unknown scenario(s) {unknown}; known: {', '.join(ORDER)}")
    stamp = now_stamp()
    out_path = ns.out or ROOT / "bench" / "results" / f"{stamp}{'-quick' if ns.quick else ''}.json"
    results: dict[str, Any] = {"profile": prof.__dict__, "started": stamp, "machine": machine(),
                               "scenarios": {}}
    t_start = time.perf_counter()
    with workdir() as base:
        for name in ORDER:
            if name not in only:
                continue
            log(f"--- {name}")
            t0 = time.perf_counter()
            try:
                results["scenarios"][name] = run_one(name, base, prof, results["scenarios"])
            except Exception as exc:  # keep the other scenarios' figures; the error is part of the record
                log(f"{name} failed: {exc!r}")
                results["scenarios"][name] = {"error": repr(exc)[:2000]}
            results["scenarios"][name]["seconds"] = round(time.perf_counter() - t0, 1)
            results["elapsed_s"] = round(time.perf_counter() - t_start, 1)
            dump(out_path, results)
    results["goals"] = report.goals(results)
    dump(out_path, results)
    log(f"wrote {out_path} in {results['elapsed_s']}s")
    table = report.render(results, out_path)
    print(table)
    if not ns.no_readme:
        report.write_readme(table, quick=ns.quick)
    return 0


def rerender(path: Path) -> int:
    import json

    results = json.loads(path.read_text())
    results["goals"] = report.goals(results)
    dump(path, results)
    table = report.render(results, path)
    print(table)
    report.write_readme(table, quick=results["profile"]["name"] == "quick")
    return 0


def run_one(name: str, base: Path, prof: scenarios.Profile, done: dict[str, Any]) -> dict[str, Any]:
    if name == "s1":
        return scenarios.scenario1(base, prof)
    if name == "s2":
        res = scenarios.scenario2(base, prof)
        try:  # the shipped asyncio client beside the bench driver; the goal reads the bench one
            res["aio_client"] = scenarios.scenario2_shipped_aio(base, prof)
        except Exception as exc:  # the bench driver's figure stands alone; the error is recorded
            log(f"s2 shipped asyncio client failed: {exc!r}")
            res["aio_client"] = {"error": repr(exc)[:2000]}
        return res
    if name == "s3":
        return scenarios.scenario3(base, prof)
    if name == "s4":
        return scenarios.scenario4(base, prof, done.get("s1"))
    if name == "s5":
        return scale.scenario5(base, prof)
    if name == "s6":
        res = scenarios.scenario6(base, prof)
        # diagnostic: the same with --no-sync shows how much of the gap is commits waiting on fsync
        res["no_sync"] = scenarios.scenario6(base, prof, sync=False)
        return res
    per_cycle = done.get("s4", {}).get("anatomy", {}).get("transitions_per_cycle") or 5
    if name == "pg":
        return pg.scenario_pg(base, prof, per_cycle)
    if name == "pgd":
        return pg_driver.scenario(prof)
    if name == "pgs":
        return scale.scenario_pg_scale(base, prof)
    if name == "cl":
        return cluster.scenario_cluster(base, prof)
    return scenarios.transitions(base, prof, per_cycle)


if __name__ == "__main__":
    sys.exit(main())
