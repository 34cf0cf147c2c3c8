"""Commit grouping on the engine alone: many runtimes, many concurrent writers, one synced LMDB store.

    python -m bench.commits                  # N = 1, 8, 64 runtimes; 3 repetitions each
    python -m bench.commits --runtimes 8 --writers 4 --changes 2000 --reps 5 --json out.json

What it shows: whether the changes of many runtimes still share one write
transaction (one fsync) when they queue up together. Each writer task spawns
child handles through the runtime API (``Runtime.spawn``: a real change — the
parent's record, the child's record, the children log and a ``spawn`` event),
one after another; ``runtimes × writers`` of them run at once. Reported per
configuration (median of the repetitions, with min–max): changes committed per
second, write transactions per change, read from LMDB's own transaction
counter (``env.info()['last_txnid']``), so the figure is the same whichever
layer of the daemon does the grouping, and the process's CPU time per change
(all threads: the event loop and the store's writer), which other load on a
shared machine disturbs far less than the rate. A lone writer (1 × 1) shows what
grouping costs a commit that has no company: it should get one transaction per
change and no wait.

The store is a synced ``LmdbStore`` in a fresh temporary directory per
repetition, on the same disk as the system's temporary directory.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from toolnexus_daemon.clock import SystemClock  # noqa: E402
from toolnexus_daemon.engine.verbs.engine import Engine  # noqa: E402
from toolnexus_daemon.model import AgentDef, LlmConfig, LlmStyle, RuntimeOptions  # noqa: E402
from toolnexus_daemon.store import LmdbStore  # noqa: E402

# (runtimes, writers per runtime): a lone writer first, then the brief's N = 1, 8, 64
CONFIGS = [(1, 1), (1, 4), (8, 4), (64, 4)]
CHANGES = 2048  # per configuration and repetition, spread over its writers
REPS = 3


@dataclass(frozen=True)
class Rep:
    changes: int
    seconds: float
    cpu_seconds: float
    transactions: int

    @property
    def per_second(self) -> float:
        return self.changes / self.seconds

    @property
    def txns_per_change(self) -> float:
        return self.transactions / self.changes

    @property
    def cpu_us_per_change(self) -> float:
        return self.cpu_seconds / self.changes * 1e6


class NoModel:
    """Spawning never calls the model; the engine only needs something to close."""

    async def aclose(self) -> None:
        return None


def _last_txnid(store: LmdbStore) -> int:
    # the store's own environment: a second open of the same directory in one process is unsafe
    return int(store._env.info()["last_txnid"])


async def one_rep(runtimes: int, writers: int, changes: int) -> Rep:
    """``runtimes`` runtimes with ``writers`` concurrent writers each, ``changes`` spawns in all."""
    data = Path(tempfile.mkdtemp(prefix="tnx-commits-"))
    store = LmdbStore(data / "data", sync=True)
    engine = Engine(store, clock=SystemClock(), model_for=lambda llm: NoModel(),  # type: ignore[arg-type,return-value]
                    executors={})
    try:
        rts = []
        for i in range(runtimes):
            out = await engine.new(f"rt-{i:03d}", [AgentDef(name="worker")],
                                   LlmConfig(style=LlmStyle.WORKER, model="none"), RuntimeOptions())
            rts.append(engine.runtime(out.runtime_id))
        each = max(1, changes // (runtimes * writers))

        async def writer(rt: Any) -> None:
            for _ in range(each):
                await rt.spawn("root", "worker")

        tx0, t0, c0 = _last_txnid(store), time.perf_counter(), time.process_time()
        await asyncio.gather(*(writer(rt) for rt in rts for _ in range(writers)))
        seconds, cpu, tx1 = time.perf_counter() - t0, time.process_time() - c0, _last_txnid(store)
        return Rep(changes=each * runtimes * writers, seconds=seconds, cpu_seconds=cpu,
                   transactions=tx1 - tx0)
    finally:
        await engine.stop()
        store.close()
        shutil.rmtree(data, ignore_errors=True)


def _summary(values: list[float], digits: int) -> dict[str, Any]:
    return {"median": round(statistics.median(values), digits), "min": round(min(values), digits),
            "max": round(max(values), digits), "n": len(values)}


async def run(configs: list[tuple[int, int]], changes: int, reps: int) -> list[dict[str, Any]]:
    rows = []
    for runtimes, writers in configs:
        await one_rep(runtimes, writers, min(changes, 256))  # warm-up: imports, first map pages
        done = [await one_rep(runtimes, writers, changes) for _ in range(reps)]
        rows.append({"runtimes": runtimes, "writers_per_runtime": writers, "changes": done[0].changes,
                     "commits_per_s": _summary([r.per_second for r in done], 0),
                     "txns_per_change": _summary([r.txns_per_change for r in done], 3),
                     "cpu_us_per_change": _summary([r.cpu_us_per_change for r in done], 1)})
        row = rows[-1]
        print(f"{runtimes:>4} runtimes x {writers} writers: "
              f"{row['commits_per_s']['median']:>8.0f} commits/s "
              f"({row['commits_per_s']['min']:.0f}-{row['commits_per_s']['max']:.0f}), "
              f"{row['txns_per_change']['median']:.3f} write txns/change "
              f"({row['txns_per_change']['min']:.3f}-{row['txns_per_change']['max']:.3f}), "
              f"{row['cpu_us_per_change']['median']:.0f} us CPU/change "
              f"({row['cpu_us_per_change']['min']:.0f}-{row['cpu_us_per_change']['max']:.0f})", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runtimes", type=int, nargs="*", help="runtime counts (default: 1 8 64)")
    parser.add_argument("--writers", type=int, default=4, help="concurrent writers per runtime")
    parser.add_argument("--changes", type=int, default=CHANGES, help="changes per repetition")
    parser.add_argument("--reps", type=int, default=REPS)
    parser.add_argument("--json", type=Path, help="also write the rows to this file")
    args = parser.parse_args()
    configs = [(n, args.writers) for n in args.runtimes] if args.runtimes else CONFIGS
    rows = asyncio.run(run(configs, args.changes, args.reps))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
