"""The shipped asyncio client's CPU per cycle with 16 runtimes at once, as bench/pg_overlap.py drives them.

Each client is an ``aio.Runtime`` with its own channel and ``Connect`` worker stream serving the
mock model (``llm.style = "worker"``) and the tool from ``async def`` callables, and the cycle is
spawn, wake, wait → pending, resume → done (4 unary RPCs; the worker answers a model call, a tool
call, the tool call again with the answer, a model call), as ``bench.driver.Daemon`` runs it. One
daemon subprocess (127.0.0.1, port 0, a temporary LMDB directory, ``--no-sync`` unless ``--sync``,
so the disk's weather stays out), ``--clients`` runtimes, a warm-up cycle each, then ``--reps``
repetitions of ``--cycles`` cycles per client, all clients at once. A repetition's figure is this
process's CPU (``time.process_time()``: the clients' event loop and gRPC's threads, and the thread
that reads the daemon's log) divided by the cycles run; the daemon is another process.

Without ``--tree`` the client measured is the one ``PYTHONPATH`` names (printed), driven by
``bench.driver.Daemon``. With two or more ``--tree NAME=CHECKOUT``, each checkout's client is loaded
in this one process under a module name of its own (``tnc_NAME``), each with its own ``--clients``
runtimes on the same daemon, and the repetitions alternate between them (ABBA...): paired figures
that share the machine's weather, which on a shared machine moves the CPU per cycle more than the
client does. The ratio of each repetition to the first tree's neighbouring one is reported::

    PYTHONPATH=$PWD:$PWD/clients/python .venv/bin/python -m bench.client_cpu --reps 5 --cycles 40
    .venv/bin/python -m bench.client_cpu --tree before=/tmp/client-before --tree after=. --reps 10

Bounded: ``trees × clients × cycles × (reps + 1)`` cycles.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))  # after PYTHONPATH: the client measured is the one PYTHONPATH names

from bench.driver import AGENT, PROMPT, TOOL, mock_reply  # noqa: E402
from tests.support.daemon import DaemonProcess  # noqa: E402

Cycle = Callable[[], Awaitable[None]]


class Tree:
    """One client: its runtimes on the daemon and their cycle."""

    def __init__(self, name: str, module: str, plain: bool = False) -> None:
        self.name = name
        self.plain = plain
        self.module = module
        self.client = importlib.import_module(module)
        self.aio = importlib.import_module(f"{module}.aio")
        self.runtimes: list[Any] = []
        self.per_rep: list[float] = []
        self.rates: list[float] = []

    def registry(self) -> Any:
        tnc = self.client

        def secret_action(args: Any, ctx: Any) -> Any:
            if ctx.answer is not None:
                return "action performed"
            return tnc.ToolResult.suspend(id=f"approve:{ctx.handle}", kind="approval", prompt="approve?")

        async def async_secret_action(args: Any, ctx: Any) -> Any:
            return secret_action(args, ctx)

        tool = tnc.Tool(TOOL, description="an action that needs approval",
                        input_schema={"type": "object", "properties": {}},
                        execute=secret_action if self.plain else async_secret_action)
        return tnc.registry(tnc.agent(AGENT, does="performs actions that need authorization",
                                      uses={"tools": [tool]}))

    async def connect(self, target: str, clients: int) -> None:
        def plain_transport(request: Any) -> dict[str, Any]:
            return mock_reply(request["body"])

        async def transport(request: Any) -> dict[str, Any]:
            return mock_reply(request["body"])

        registry = self.registry()
        served = plain_transport if self.plain else transport
        self.runtimes = list(await asyncio.gather(*(
            self.aio.Runtime.new(target, registry=registry, transport=served, connect_timeout=30.0)
            for _ in range(clients))))

    @staticmethod
    async def cycle(rt: Any) -> None:
        """bench.driver.Daemon.cycle, on this tree's runtime."""
        handle = await rt.spawn(rt.root, AGENT)
        await rt.wake(handle, PROMPT)
        result = await rt.wait(handle, 60.0)
        if result.status != "pending" or result.pending is None:
            raise RuntimeError(f"expected pending, got {result.status}: {result.text}")
        done = await rt.resume({"id": result.pending.id, "ok": True})
        if done.result is None or done.result.text != "action performed":
            raise RuntimeError(f"expected done, got {done}")

    async def run(self, cycles: int) -> None:
        async def lane(rt: Any) -> None:
            for _ in range(cycles):
                await self.cycle(rt)

        await asyncio.gather(*(lane(rt) for rt in self.runtimes))

    async def close(self) -> None:
        await asyncio.gather(*(rt.detach() for rt in self.runtimes))


def load_trees(specs: list[str], scratch: Path, plain: bool) -> list[Tree]:
    """Each ``NAME=CHECKOUT``'s client importable as ``tnc_NAME`` (its modules import each other
    relatively, so a link under another name is that client, whole)."""
    sys.path.insert(0, str(scratch))
    trees = []
    for spec in specs:
        name, _, checkout = spec.partition("=")
        if not name.isidentifier() or not checkout:
            raise SystemExit(f"--tree wants NAME=CHECKOUT, got {spec!r}")
        package = Path(checkout).resolve() / "clients" / "python" / "toolnexus_client"
        if not (package / "__init__.py").exists():
            raise SystemExit(f"no client at {package}")
        (scratch / f"tnc_{name}").symlink_to(package, target_is_directory=True)
        trees.append(Tree(name, f"tnc_{name}", plain))
    return trees


async def measure_trees(target: str, trees: list[Tree], clients: int, cycles: int,
                        reps: int) -> dict[str, Any]:
    for tree in trees:
        await tree.connect(target, clients)
    try:
        for tree in trees:
            await tree.run(1)  # warm-up: each runtime's first turn
        for rep in range(reps):
            for tree in (trees if rep % 2 == 0 else list(reversed(trees))):
                c0, t0 = time.process_time(), time.perf_counter()
                await tree.run(cycles)
                cpu, wall = time.process_time() - c0, time.perf_counter() - t0
                tree.per_rep.append(cpu / (clients * cycles) * 1e3)
                tree.rates.append(clients * cycles / wall)
    finally:
        for tree in trees:
            await tree.close()
    first = trees[0]
    out: dict[str, Any] = {}
    for tree in trees:
        out[tree.name] = {**_summary(tree.per_rep), "cycles_per_s": round(statistics.median(tree.rates), 1),
                          "client": str(Path(tree.client.__file__).resolve().parent)}
        if tree is not first:
            out[tree.name][f"ratio_to_{first.name}"] = _summary(
                [t / f for t, f in zip(tree.per_rep, first.per_rep, strict=True)])
    return out


async def measure_one(target: str, clients: int, cycles: int, reps: int) -> dict[str, Any]:
    """The client on PYTHONPATH, through bench.driver.Daemon."""
    import toolnexus_client
    from bench.driver import Daemon

    ds = await asyncio.gather(*(Daemon.connect(target) for _ in range(clients)))
    per_rep: list[float] = []
    rates: list[float] = []
    try:
        await asyncio.gather(*(d.cycle() for d in ds))  # warm-up: each runtime's first turn

        async def run(d: Daemon) -> None:
            for _ in range(cycles):
                await d.cycle()

        for _ in range(reps):
            c0, t0 = time.process_time(), time.perf_counter()
            await asyncio.gather(*(run(d) for d in ds))
            cpu, wall = time.process_time() - c0, time.perf_counter() - t0
            per_rep.append(cpu / (clients * cycles) * 1e3)
            rates.append(clients * cycles / wall)
    finally:
        await asyncio.gather(*(d.close() for d in ds))
    return {"client": str(Path(toolnexus_client.__file__).parent), **_summary(per_rep),
            "cycles_per_s": round(statistics.median(rates), 1)}


def _summary(values: list[float]) -> dict[str, Any]:
    return {"median": round(statistics.median(values), 3), "min": round(min(values), 3),
            "max": round(max(values), 3), "per_rep": [round(v, 3) for v in values]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--cycles", type=int, default=40, help="cycles per client per repetition")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--sync", action="store_true", help="a synced daemon (default --no-sync)")
    parser.add_argument("--tree", action="append", default=[], metavar="NAME=CHECKOUT",
                        help="a checkout whose client to measure, paired with the others (give 2+)")
    parser.add_argument("--plain", action="store_true",
                        help="with --tree: the tool and the model plain functions (run in threads, "
                             "as bench.client_cycle serves them) rather than async def")
    args = parser.parse_args(argv)
    if args.plain and not args.tree:
        parser.error("--plain goes with --tree")
    if not (1 <= args.clients <= 64 and 1 <= args.cycles <= 1000 and 1 <= args.reps <= 50):
        parser.error("--clients 1..64, --cycles 1..1000, --reps 1..50")
    if len(args.tree) == 1:
        parser.error("--tree pairs two or more checkouts (without it: the client on PYTHONPATH)")
    with tempfile.TemporaryDirectory(prefix="tnx-client-cpu-") as tmp:
        trees = load_trees(args.tree, Path(tmp), args.plain) if args.tree else []
        proc = DaemonProcess(Path(tmp) / "data", *(() if args.sync else ("--no-sync",))).start(timeout=120)
        try:
            if trees:
                figures = asyncio.run(measure_trees(proc.target, trees, args.clients, args.cycles, args.reps))
            else:
                figures = asyncio.run(measure_one(proc.target, args.clients, args.cycles, args.reps))
        finally:
            proc.stop(timeout=60)
    out = {"clients": args.clients, "cycles_per_client": args.cycles, "reps": args.reps, "synced": args.sync,
           "callables": "plain" if args.plain else "async def",
           "unit": "client process CPU ms per cycle", **figures}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
