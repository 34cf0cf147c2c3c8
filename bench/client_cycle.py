"""The tool/suspend cycle through the shipped Python clients, classic beside fused, interleaved.

What an application on ``toolnexus_client`` pays per cycle (a native tool suspends for an
approval, the app answers, the agent finishes) when it drives the daemon the way the client's
README shows: the **classic** cycle is ``spawn``, ``wake``, ``wait`` (→ pending) and ``resume``
(→ done), four RPCs; the **fused** cycle is ``spawn(prompt=, wait=)`` (→ pending) and ``resume``,
two RPCs. Both run through the asyncio client (``toolnexus_client.aio.Runtime``) and the blocking
client (``toolnexus_client.Runtime``), on one daemon subprocess (127.0.0.1, port 0, a temporary
LMDB directory) whose model is the scripted OpenAI-compatible server of ``toolnexus_devtools``
(the reference mock: call the tool, then answer with its output). Only the public client API is
used, so the same script measures any version of the client (``PYTHONPATH`` picks it).

Every repetition runs ``--cycles`` rounds; a round is one cycle of each variant in an order
rotated round by round, so all variants share the machine's weather. A repetition's figure is
the median cycle of each variant (and of one ``snapshot``, a unary call alone: what a client
adds to a round trip); the report is the median over ``--reps`` repetitions (after one warm-up
repetition) with their min–max, and the client process's CPU per cycle. Bounded:
``reps × cycles × variants`` cycles. The blocking client is called from a worker thread
(``asyncio.to_thread``), the same for every version measured.

    PYTHONPATH=$PWD:$PWD/clients/python .venv/bin/python -m bench.client_cycle --reps 5 --cycles 40
"""

from __future__ import annotations

import argparse
import asyncio
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

import toolnexus_client  # noqa: E402
from tests.support.daemon import DaemonProcess  # noqa: E402
from toolnexus_client import (  # noqa: E402
    Context,
    ResumeResult,
    Runtime,
    TaskResult,
    Tool,
    ToolResult,
    agent,
    aio,
    registry,
)
from toolnexus_devtools import ScriptedModelServer, mock_model  # noqa: E402

AGENT = "operator"
PROMPT = "please perform the secret action"
WAIT_S = 60.0


def secret_action(args: dict[str, Any], ctx: Context) -> ToolResult | str:
    if ctx.answer is None:
        return ToolResult.suspend(id=f"approve:{ctx.action_id}", kind="approval", prompt="approve?")
    return "action performed"


def transport(request: dict[str, Any]) -> dict[str, Any]:
    """The scripted model served by the client's own worker stream (``llm`` style ``worker``)."""
    return {"status": 200, "headers": {}, "body": mock_model(request["body"])}


REGISTRY = registry(agent(AGENT, does="acts after approval",
                          uses={"tools": [Tool("secret_action", execute=secret_action)]}))


def _suspended(result: TaskResult) -> str:
    """The id of the approval the cycle suspended on."""
    if result.status != "pending" or result.pending is None:
        raise RuntimeError(f"expected the cycle to suspend, got {result.status}")
    return result.pending.id


def _finished(done: ResumeResult) -> None:
    if done.result is None or done.result.text != "action performed":
        raise RuntimeError(f"expected the cycle to finish, got {done}")


async def aio_classic(rt: aio.Runtime) -> None:
    handle = await rt.spawn(rt.root, AGENT)
    await rt.wake(handle, PROMPT)
    result = await rt.wait(handle, timeout=WAIT_S)
    _finished(await rt.resume({"id": _suspended(result), "ok": True}))


async def aio_fused(rt: aio.Runtime) -> None:
    woken = await rt.spawn(rt.root, AGENT, prompt=PROMPT, wait=WAIT_S)
    result = woken.result if woken.result is not None else await rt.wait(woken.handle, timeout=WAIT_S)
    _finished(await rt.resume({"id": _suspended(result), "ok": True}))


def blocking_classic(rt: Runtime) -> None:
    handle = rt.spawn(rt.root, AGENT)
    rt.wake(handle, PROMPT)
    result = rt.wait(handle, timeout=WAIT_S)
    _finished(rt.resume({"id": _suspended(result), "ok": True}))


def blocking_fused(rt: Runtime) -> None:
    woken = rt.spawn(rt.root, AGENT, prompt=PROMPT, wait=WAIT_S)
    result = woken.result if woken.result is not None else rt.wait(woken.handle, timeout=WAIT_S)
    _finished(rt.resume({"id": _suspended(result), "ok": True}))


async def _timed(call: Callable[[], Awaitable[None]]) -> tuple[float, float]:
    """(wall, CPU) seconds of one cycle; the CPU is this client process's, all its threads (nothing
    else runs in it between cycles, so that is what the cycle cost the client)."""
    t0, c0 = time.perf_counter(), time.process_time()
    await call()
    return time.perf_counter() - t0, time.process_time() - c0


async def measure(target: str, llm: dict[str, str] | None, reps: int, cycles: int) -> dict[str, Any]:
    """Per variant: the median cycle (ms) of each repetition, after one warm-up repetition.

    ``llm`` None: the model is the client's ``transport`` (over its worker stream)."""
    model = {"llm": llm} if llm is not None else {"transport": transport}
    art = await aio.Runtime.new(target, REGISTRY, **model)
    brt = await asyncio.to_thread(lambda: Runtime.new(target, REGISTRY, **model))
    # an idle handle in each runtime (the two clients made one each): what the unary rows read
    aio_probe = await art.spawn(art.root, AGENT)
    blocking_probe = await asyncio.to_thread(brt.spawn, brt.root, AGENT)

    async def aio_snapshot() -> None:
        await art.snapshot(aio_probe)

    def blocking_snapshot() -> None:
        brt.snapshot(blocking_probe)

    variants: dict[str, Callable[[], Awaitable[None]]] = {
        # one unary call (Snapshot) alone: what the client adds to a round trip
        "aio snapshot (1 RPC)": aio_snapshot,
        "blocking snapshot (1 RPC)": lambda: asyncio.to_thread(blocking_snapshot),
        "aio classic (4 RPCs)": lambda: aio_classic(art),
        "aio fused (2 RPCs)": lambda: aio_fused(art),
        # the blocking client runs in a thread, as it would beside an application's own loop
        "blocking classic (4 RPCs)": lambda: asyncio.to_thread(blocking_classic, brt),
        "blocking fused (2 RPCs)": lambda: asyncio.to_thread(blocking_fused, brt),
    }
    names = list(variants)
    per_rep: dict[str, list[float]] = {name: [] for name in names}
    cpu_per_rep: dict[str, list[float]] = {name: [] for name in names}
    try:
        for rep in range(reps + 1):  # repetition 0 warms up
            samples: dict[str, list[tuple[float, float]]] = {name: [] for name in names}
            for round_no in range(cycles):
                shift = round_no % len(names)
                for name in names[shift:] + names[:shift]:
                    samples[name].append(await _timed(variants[name]))
            if rep:
                for name in names:
                    per_rep[name].append(statistics.median(w for w, _ in samples[name]) * 1e3)
                    cpu_per_rep[name].append(statistics.median(c for _, c in samples[name]) * 1e3)
    finally:
        await art.detach()
        await asyncio.to_thread(brt.detach)
    return {name: {"median_ms": round(statistics.median(v), 2), "min_ms": round(min(v), 2),
                   "max_ms": round(max(v), 2), "reps": [round(x, 2) for x in v],
                   "client_cpu_ms": round(statistics.median(cpu_per_rep[name]), 2)}
            for name, v in per_rep.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5, help="measured repetitions (after one warm-up)")
    parser.add_argument("--model", choices=("worker", "http"), default="worker",
                        help="worker: the scripted model as the client's transport; http: the scripted "
                             "OpenAI-compatible server, called by the daemon")
    parser.add_argument("--no-sync", action="store_true",
                        help="the daemon without fsync per commit: less of the disk's weather in the figures")
    parser.add_argument("--cycles", type=int, default=40, help="rounds per repetition")
    args = parser.parse_args(argv)
    if not (1 <= args.reps <= 50 and 1 <= args.cycles <= 1000):
        parser.error("--reps is 1..50 and --cycles 1..1000")
    with tempfile.TemporaryDirectory(prefix="tnx-client-cycle-") as tmp, ScriptedModelServer() as model:
        proc = DaemonProcess(Path(tmp) / "data", *(["--no-sync"] if args.no_sync else [])).start(timeout=120)
        try:
            http = {"style": "openai", "base_url": model.url, "model": "bench"}
            llm = http if args.model == "http" else None
            figures = asyncio.run(measure(proc.target, llm, args.reps, args.cycles))
        finally:
            proc.stop(timeout=60)
    out = {"client": str(Path(toolnexus_client.__file__).parent), "model": args.model,
           "synced": not args.no_sync, "reps": args.reps,
           "cycles_per_rep": args.cycles, "load_1m": round(_load(), 2), "cycle": figures}
    for name, fig in figures.items():
        print(f"{name:28} median {fig['median_ms']:7.2f} ms  (reps {fig['min_ms']:.2f}–{fig['max_ms']:.2f}), "
              f"client CPU {fig['client_cpu_ms']:.2f} ms")
    print(json.dumps(out))
    return 0


def _load() -> float:
    try:
        return float(Path("/proc/loadavg").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return -1.0

if __name__ == "__main__":
    raise SystemExit(main())
