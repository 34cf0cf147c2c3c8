"""The daemon's CPU time per benchmark cycle, read from ``/proc`` (Linux), old vs new in one sitting.

    python -m bench.cpu                          # this checkout's daemon, 16 lanes and 1 lane
    python -m bench.cpu --cycles 800 --reps 7 --lanes 16
    python -m bench.cpu --daemon OLD_PYTHON:OLD_ROOT --daemon NEW_PYTHON:NEW_ROOT   # alternating
    python -m bench.cpu --daemon PY:ROOT --daemon PY:ROOT:GRPC_POLL_STRATEGY=poll  # one env lever A/B

One daemon per ``--daemon`` (a python whose environment has that checkout installed, and the
checkout to run it from; default: this interpreter and this checkout) stays up for the whole
run. After a warm-up, each repetition runs ``--cycles`` cycles (spawn, wake, wait → pending,
resume → done; the model and the tool served by the Connect worker of the shipped asyncio
client, ``bench/driver.py``) on
``--lanes`` concurrent lanes against each daemon in turn, and reads the daemon's utime + stime
from ``/proc/<pid>/stat`` (and per thread from ``/proc/<pid>/task``) before and after: the
process's CPU, whatever thread spent it, divided by the cycles. The figure is the median of
the repetitions with its min–max; the per-thread split shows the event loop (the main thread)
apart from grpc's threads and the store's writer.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import statistics
import sys
import time
from pathlib import Path

from .common import ROOT, DaemonProcess, log, workdir
from .driver import Daemon, run_concurrent

TICK = os.sysconf("SC_CLK_TCK")


def _cpu_ticks(stat_path: Path) -> int:
    """utime + stime of one ``stat`` file, in clock ticks (fields 14 and 15, after the ``comm``)."""
    text = stat_path.read_text()
    fields = text[text.rindex(")") + 2:].split()
    return int(fields[11]) + int(fields[12])


def process_cpu(pid: int) -> float:
    """Seconds of CPU the process has used (all its threads, live and exited)."""
    return _cpu_ticks(Path(f"/proc/{pid}/stat")) / TICK


def thread_cpu(pid: int) -> dict[str, float]:
    """Seconds of CPU per live thread, keyed ``main`` for the event loop's thread else by its name."""
    out: collections.Counter[str] = collections.Counter()
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            ticks = _cpu_ticks(task / "stat")
            name = "main" if task.name == str(pid) else (task / "comm").read_text().strip()
        except OSError:  # the thread ended between the listing and the read
            continue
        out[name] += ticks / TICK
    return dict(out)


def parse_env(text: str) -> dict[str, str]:
    """``K=V,K2=V2`` (the optional third part of a ``--daemon`` spec) as a dict: an environment
    lever (``GRPC_*``, ``PYTHONPATH``) measured against the same checkout without it."""
    pairs = (item.partition("=") for item in text.split(",") if item)
    return {key: value for key, _, value in pairs}


class Variant:
    """One daemon (a python and the checkout it runs from) and the driver connected to it."""

    def __init__(self, spec: str, base: Path, index: int, args: tuple[str, ...]) -> None:
        python, _, rest = spec.partition(":")
        root, _, env = rest.partition(":")
        self.label = spec if spec != f"{sys.executable}:{ROOT}" else "this checkout"
        self.proc = DaemonProcess(base / f"d{index}", *args, listen=("127.0.0.1:0",), python=python,
                                  cwd=Path(root) if root else ROOT, env=parse_env(env))
        self.per_cycle: list[float] = []
        self.threads: collections.Counter[str] = collections.Counter()
        self.cycles = 0
        self.rate: list[float] = []
        self.client: Daemon | None = None

    async def start(self) -> None:
        self.proc.start(timeout=120)
        self.client = await Daemon.connect(self.proc.target, runtime_id="bench-cpu")

    async def run(self, lanes: int, cycles: int) -> tuple[float, float]:
        """``cycles`` cycles on ``lanes`` lanes; (daemon CPU seconds, wall seconds)."""
        assert self.client is not None and self.proc.proc is not None
        client = self.client
        pid = self.proc.proc.pid
        before, threads_before = process_cpu(pid), thread_cpu(pid)
        wall = await run_concurrent(lanes, cycles, lambda i: client.cycle())
        after, threads_after = process_cpu(pid), thread_cpu(pid)
        for name, t in threads_after.items():
            self.threads[name] += t - threads_before.get(name, 0.0)
        return after - before, wall

    async def stop(self) -> None:
        if self.client is not None:
            await self.client.close()
        self.proc.stop(timeout=60)


async def measure(variants: list[Variant], lanes: int, cycles: int, reps: int, warmup: int) -> None:
    for v in variants:
        v.per_cycle.clear()
        v.threads.clear()
        v.rate.clear()
        v.cycles = 0
        await v.run(lanes, warmup)
    for rep in range(reps):
        order = variants if rep % 2 == 0 else list(reversed(variants))
        for v in order:
            cpu, wall = await v.run(lanes, cycles)
            v.per_cycle.append(cpu / cycles * 1e3)
            v.rate.append(cycles / wall)
            v.cycles += cycles
            log(f"{v.label} lanes={lanes} rep {rep + 1}: {cpu / cycles * 1e3:.2f} ms CPU/cycle, "
                f"{cycles / wall:.0f} cycles/s")


def report(variants: list[Variant], lanes: int) -> str:
    lines = [f"lanes={lanes}"]
    for v in variants:
        med = statistics.median(v.per_cycle)
        lines.append(f"  {v.label}: {med:.2f} ms daemon CPU per cycle (min {min(v.per_cycle):.2f}, "
                     f"max {max(v.per_cycle):.2f}, n={len(v.per_cycle)}); "
                     f"{statistics.median(v.rate):.0f} cycles/s")
        split = ", ".join(f"{name} {t / v.cycles * 1e3:.2f}" for name, t in v.threads.most_common() if t > 0)
        lines.append(f"    per thread (ms/cycle): {split}")
    if len(variants) == 2:
        a, b = (statistics.median(v.per_cycle) for v in variants)
        lines.append(f"  ratio second/first: {b / a:.3f}")
    return "\n".join(lines)


async def amain(ns: argparse.Namespace) -> int:
    specs = ns.daemon or [f"{sys.executable}:{ROOT}"]
    args = ("--no-sync",) if ns.no_sync else ()
    with workdir("tnx-cpu-") as base:
        variants = [Variant(s, base, i, args) for i, s in enumerate(specs)]
        try:
            for v in variants:
                await v.start()
            out = []
            for lanes in ns.lanes:
                await measure(variants, lanes, ns.cycles, ns.reps, ns.warmup)
                out.append(report(variants, lanes))
            print("\n".join(out))
        finally:
            for v in variants:
                await v.stop()
    return 0


def main() -> int:
    p = argparse.ArgumentParser(prog="python -m bench.cpu")
    p.add_argument("--daemon", action="append", default=[], metavar="PYTHON:ROOT[:K=V,...]",
                   help="a daemon to measure (repeat to alternate old and new), optionally with extra "
                        "environment variables; default this checkout")
    p.add_argument("--lanes", type=int, nargs="+", default=[16, 1])
    p.add_argument("--cycles", type=int, default=500, help="cycles per repetition")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--no-sync", action="store_true", help="a --no-sync daemon (no fsync waits)")
    if not Path("/proc/self/stat").exists():
        print("bench.cpu reads /proc: Linux only", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    rc = asyncio.run(amain(p.parse_args()))
    log(f"done in {time.perf_counter() - t0:.0f}s")
    return rc


if __name__ == "__main__":
    sys.exit(main())
