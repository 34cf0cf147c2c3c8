"""The S1 cycle with tracing on beside tracing off (docs/observability.md; goal ≤ 1.05×).

Two synced daemons side by side: one without an OTLP endpoint (tracing off: the engine's no-op
tracer), one exporting every span over OTLP/HTTP to a real receiver on 127.0.0.1 (the tests'
``Collector``: it decodes every ExportTraceServiceRequest, so export is not free). The bench
driver (``bench/driver.py``, the shipped asyncio client) runs the S1 cycle (spawn, wake, wait →
pending, resume → done; the model and the tool served over the worker stream) against both over
unix sockets, interleaved cycle by cycle (``interleave``), and the on/off ratio is taken per
repetition.

    .venv/bin/python -m bench.tracing [--reps 7] [--cycles 20] [--warmup 20]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import time
from typing import Any

import psutil

from tests.tracing.collector import Collector

from . import interleave
from .common import daemon, log, unix_target, workdir
from .driver import Daemon

# spans one S1 cycle exports: two turns, two model calls, two tool calls
SPANS_PER_CYCLE = 6


def measure(reps: int, cycles: int, warmup: int) -> dict[str, Any]:
    loop = asyncio.new_event_loop()
    try:
        with workdir("tnx-bench-tracing-") as base, Collector() as collector:
            with contextlib.ExitStack() as stack:
                off = stack.enter_context(daemon(base, name="off"))
                on = stack.enter_context(daemon(base, "--otlp-endpoint", collector.url, name="on"))
                drivers = {name: interleave.on_loop(loop, Daemon.connect(unix_target(proc)))
                           for name, proc in (("off", off), ("on", on))}
                for d in drivers.values():
                    stack.callback(interleave.on_loop, loop, d.close())
                variants = {name: interleave.aio_variant(loop, d) for name, d in drivers.items()}
                probe = interleave.CommitProbe(base / "probe")
                procs = {"off": psutil.Process(off.proc.pid), "on": psutil.Process(on.proc.pid)}
                cpu0 = {name: _cpu(p) for name, p in procs.items()}
                try:
                    res = interleave.run(variants, warmup=warmup, reps=reps, cycles=cycles, probe=probe,
                                         label="tracing")
                finally:
                    probe.close()
                # the daemons' CPU per cycle (the exporter's thread included): steadier than latency
                # on a shared machine, where another session's load falls on either variant
                per_cycle = {name: (_cpu(p) - cpu0[name]) / (warmup + reps * cycles) * 1e3
                             for name, p in procs.items()}
            # the daemons stopped (SIGTERM): the traced one exported what it still had batched
            expected = (warmup + reps * cycles) * SPANS_PER_CYCLE
            deadline = time.monotonic() + 10
            while len(collector.spans) < expected and time.monotonic() < deadline:
                time.sleep(0.1)
            exported = len(collector.spans)
    finally:
        loop.close()
    return {"off": interleave.figure(res, "off"), "on": interleave.figure(res, "on"),
            "on_over_off": interleave.paired_ratio(res, "on", "off"),
            "daemon_cpu_ms_per_cycle": {k: round(v, 3) for k, v in per_cycle.items()},
            "spans_exported": exported, "spans_expected": expected,
            "commit_probe_ms": res["commit_probe_ms"], "reps": reps, "cycles_per_rep": cycles}


def _cpu(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return float(t.user + t.system)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--cycles", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=20)
    ns = parser.parse_args()
    out = measure(ns.reps, ns.cycles, ns.warmup)
    log(f"tracing on/off: {out['on_over_off']}; daemon CPU ms per cycle {out['daemon_cpu_ms_per_cycle']}")
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
