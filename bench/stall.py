"""The aio-over-TCP stall (bench/README.md, T1): the cycle per transport, interleaved, on fresh channels.

    python -m bench.stall                      # 8 rounds × (tcp, unix, blocking tcp), 20 cycles each
    python -m bench.stall --rounds 12 --option grpc.http2.bdp_probe=0

One daemon; every round opens a fresh channel per transport, in turn, so load
from other sessions falls on all three and a connection that falls into a slow
state shows up as a slow round instead of hiding inside a median. Prints, per
transport, the median of the round medians, the worst round, and how many
cycles took longer than ``--slow-ms`` (a stall of a delayed ACK or a timer is
tens of ms; a cycle is ~13). The aio rounds run the benchmark's driver, the
shipped asyncio client (``bench/driver.py``), on the client's own channel
options: the ablation of single channel options (``--option``) that the
generated stubs allowed is gone with them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from . import interleave
from .common import daemon, log, tcp_target, unix_target, workdir
from .driver import Daemon


async def _aio_round(target: str, cycles: int) -> list[float]:
    d = await Daemon.connect(target)
    try:
        for _ in range(3):  # the first cycles of a connection pay for its setup
            await d.cycle()
        out = []
        for _ in range(cycles):
            t0 = time.perf_counter()
            await d.cycle()
            out.append((time.perf_counter() - t0) * 1e3)
        return out
    finally:
        await d.close()


def _blocking_round(target: str, cycles: int) -> list[float]:
    with interleave.blocking_variant(target) as blocking:
        blocking(3, {})
        return [x * 1e3 for x in blocking(cycles, {})]


def _runnable() -> int:
    """Runnable tasks on the machine now (``procs_running`` of /proc/stat; 0 where there is none)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/stat").read_text().splitlines():
            if line.startswith("procs_running"):
                return int(line.split()[1])
    return 0


def measure(rounds: int, cycles: int, slow_ms: float,
            blocking: bool = True, daemon_args: tuple[str, ...] = ()) -> dict[str, Any]:
    """Interleaved rounds on one daemon; per transport: round medians, worst round, slow cycles; per
    round the synced-commit probe and the runnable count, to tell a transport's stall from the weather."""
    per: dict[str, list[list[float]]] = {"aio_tcp": [], "aio_unix": []}
    if blocking:
        per["blocking_tcp"] = []
    weather: list[dict[str, float]] = []
    with workdir() as base, daemon(base, *daemon_args, name="stall") as proc:
        probe = interleave.CommitProbe(base / "probe")
        for r in range(rounds):
            order = list(per)
            order = order[r % len(order):] + order[:r % len(order)]  # nobody is always first
            for name in order:
                if name == "blocking_tcp":
                    per[name].append(_blocking_round(tcp_target(proc), cycles))
                else:
                    target = tcp_target(proc) if name == "aio_tcp" else unix_target(proc)
                    per[name].append(asyncio.run(_aio_round(target, cycles)))
            weather.append({"commit_ms": round(probe.sample(), 3), "runnable": _runnable()})
            log(f"round {r}: " + ", ".join(f"{k} {statistics.median(v[-1]):.2f}" for k, v in per.items())
                + f", commit {weather[-1]['commit_ms']} ms, runnable {weather[-1]['runnable']}")
        probe.close()
    out: dict[str, Any] = {"driver": "toolnexus_client.aio", "daemon_args": list(daemon_args),
                           "rounds": rounds, "cycles": cycles, "weather": weather,
                           "round_medians_ms": {k: [round(statistics.median(r), 2) for r in v]
                                                for k, v in per.items()}}
    for name, rs in per.items():
        meds = [statistics.median(r) for r in rs]
        flat = [x for r in rs for x in r]
        out[name] = {"median_ms": round(statistics.median(meds), 3), "worst_round_ms": round(max(meds), 3),
                     "slow_cycles": sum(x > slow_ms for x in flat), "cycles": len(flat),
                     "p90_ms": round(sorted(flat)[int(len(flat) * 0.9)], 3)}
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.stall")
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--cycles", type=int, default=20)
    p.add_argument("--slow-ms", type=float, default=30.0)
    p.add_argument("--no-blocking", action="store_true")
    p.add_argument("--no-sync", action="store_true", help="the daemon without fsync (takes the disk out)")
    ns = p.parse_args(argv)
    res = measure(ns.rounds, ns.cycles, ns.slow_ms, blocking=not ns.no_blocking,
                  daemon_args=("--no-sync",) if ns.no_sync else ())
    print(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
