"""Profile the daemon under one benchmark workload with py-spy and print where its time goes.

    python -m bench.profile cycle        # sequential cycles (scenario 1); --idle for wall time
    python -m bench.profile concurrent   # 16 clients (scenario 2), CPU only
    python -m bench.profile slow         # 1,000 handles vs the 50 ms model (scenario 6), CPU only
    python -m bench.profile park         # parking handles on a --no-sync daemon (scenario 5 setup)
    python -m bench.profile cycle --store postgresql   # the same with the state in PostgreSQL

Writes the raw collapsed stacks to bench/results/profile-<workload>[-flags].txt and
prints the top functions by own samples and by inclusive samples (a function
counted once per stack), for the daemon's threads together.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import shutil
import subprocess
import sys
import time
from pathlib import Path

from .common import ROOT, ServerProcess, daemon, log, tcp_target, workdir
from .driver import Daemon, run_concurrent


def _py_spy() -> str:
    """py-spy beside this interpreter if installed there, else the bench venv's (bench/.venv, in this
    checkout or in the main one the worktree's .venv links to), else the one on PATH."""
    near = [Path(sys.executable).parent / "py-spy", ROOT / "bench" / ".venv" / "bin" / "py-spy",
            Path(sys.executable).resolve().parent.parent.parent / "bench" / ".venv" / "bin" / "py-spy"]
    found = next((p for p in near if p.exists()), None)
    return str(found) if found else (shutil.which("py-spy") or "py-spy")


PY_SPY = _py_spy()
RUNTIME_ID = "bench-profile"


async def _park(target: str, count: int) -> None:
    d = await Daemon.connect(target, runtime_id=RUNTIME_ID)
    await run_concurrent(64, count, lambda i: d.park())
    await d.close()


async def _workload(name: str, target: str, seconds: float, model_url: str = "") -> int:
    if name == "slow":
        llm = {"style": "openai", "base_url": model_url + "/v1", "model": "slow"}
        d = await Daemon.connect(target, llm=llm, with_tool=False, worker=False)
        handles: list[str] = []

        async def spawn(i: int) -> None:
            handles.append(await d.spawn())

        await run_concurrent(32, 1000, spawn)

        async def one(h: str) -> None:
            await d.wake(h, "say ok")
            await d.wait(h)

        n = 0
        t_end = time.perf_counter() + seconds
        while time.perf_counter() < t_end:
            await asyncio.gather(*(one(h) for h in handles))
            n += len(handles)
        await d.close()
        return n
    d = await Daemon.connect(target, runtime_id=RUNTIME_ID)
    lanes = {"cycle": 1, "concurrent": 16, "park": 64}[name]
    count = 0
    t_end = time.perf_counter() + seconds

    async def body(i: int) -> None:
        nonlocal count
        if time.perf_counter() < t_end:
            await (d.park() if name == "park" else d.cycle())
            count += 1

    await run_concurrent(lanes, 10**7 if seconds else 0, body)
    await d.close()
    return count


def summarize(raw: Path, top: int = 25) -> str:
    own: collections.Counter[str] = collections.Counter()
    incl: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        n = int(count)
        total += n
        frames = stack.split(";")
        own[frames[-1]] += n
        for f in set(frames):
            incl[f] += n
    out = [f"samples: {total}", "", "own (self) time:"]
    out += [f"  {100 * c / total:5.1f}%  {f}" for f, c in own.most_common(top)]
    out += ["", "inclusive time:"]
    out += [f"  {100 * c / total:5.1f}%  {f}" for f, c in incl.most_common(top * 2)]
    return "\n".join(out)


def main() -> int:
    p = argparse.ArgumentParser(prog="python -m bench.profile")
    p.add_argument("workload", choices=("cycle", "concurrent", "slow", "park"))
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--rate", type=int, default=200)
    p.add_argument("--no-sync", action="store_true", help="profile a --no-sync daemon (CPU, no fsync waits)")
    p.add_argument("--idle", action="store_true", help="count idle samples too (wall time)")
    p.add_argument("--gil", action="store_true", help="only samples holding the GIL (Python CPU)")
    p.add_argument("--native", action="store_true", help="include C/Cython frames (grpc's core, lmdb)")
    p.add_argument("--park", type=int, default=0,
                   help="park this many suspended handles in the runtime first")
    p.add_argument("--store", choices=("lmdb", "postgresql"), default="lmdb",
                   help="where the daemon keeps its state: LMDB, or a durable PostgreSQL server of its own")
    ns = p.parse_args()
    flags = "".join(f"-{f}" for f, on in (("nosync", ns.no_sync), ("idle", ns.idle), ("gil", ns.gil),
                                          ("native", ns.native), (f"park{ns.park}", ns.park),
                                          ("pg", ns.store == "postgresql")) if on)
    raw = ROOT / "bench" / "results" / f"profile-{ns.workload}{flags}.txt"
    raw.parent.mkdir(parents=True, exist_ok=True)
    args: tuple[str, ...] = ("--no-sync",) if ns.workload == "park" or ns.no_sync else ()
    with contextlib.ExitStack() as stack:
        if ns.store == "postgresql":
            from .pg_server import durable_server  # psycopg and the server only when asked for
            args += ("--store", stack.enter_context(durable_server()).fresh_database("profile"))
        return _profile(ns, raw, args, stack.enter_context(workdir()))
    return 1


def _profile(ns: argparse.Namespace, raw: Path, args: tuple[str, ...], base: Path) -> int:
    with daemon(base, *args, name="prof", unix=False) as proc:
        model = ServerProcess("bench.slow_model", "--delay-ms", "50") if ns.workload == "slow" else None
        model_url = model.__enter__().addresses[0] if model else ""
        try:
            if ns.park:
                asyncio.run(_park(tcp_target(proc), ns.park))
            asyncio.run(_workload(ns.workload, tcp_target(proc), 2.0, model_url))  # warm-up
            spy_args = [PY_SPY, "record", "--pid", str(proc.proc.pid), "--rate", str(ns.rate),
                        "--format", "raw", "--output", str(raw), "--duration", str(int(ns.seconds) + 2)]
            if not ns.native:  # native stacks need the process paused while sampled
                spy_args.append("--nonblocking")
            if ns.idle:
                spy_args.append("--idle")
            if ns.gil:
                spy_args.append("--gil")
            if ns.native:
                spy_args.append("--native")
            spy = subprocess.Popen(spy_args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            time.sleep(1.0)
            n = asyncio.run(_workload(ns.workload, tcp_target(proc), ns.seconds, model_url))
            _, err = spy.communicate(timeout=ns.seconds + 60)
            if spy.returncode != 0:
                log(f"py-spy failed: {err.strip()[-500:]}")
                return 1
        finally:
            if model:
                model.__exit__(None, None, None)
    log(f"{ns.workload}: {n} operations in {ns.seconds}s while profiling; stacks in {raw}")
    print(summarize(raw))
    return 0


if __name__ == "__main__":
    sys.exit(main())
