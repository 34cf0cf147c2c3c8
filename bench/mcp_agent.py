"""An agent called through the daemon's MCP listener beside the same run over gRPC.

One daemon (synced LMDB) serves gRPC on 127.0.0.1 and MCP at ``/mcp`` (``--mcp-listen``,
``--mcp-expose bench``); the agent has no tools and the scripted model answers ``ok`` at once, so
what is measured is the edge: a ``tools/call`` on one open MCP session (the SDK's client over
streamable HTTP) against ``spawn`` + ``wake`` + ``wait`` of the shipped asyncio client
(``toolnexus_client.aio.Runtime``, one channel), interleaved
call by call so both see the same machine. Each repetition is the median latency of ``--calls``
runs of each; the figure is the median over ``--reps`` repetitions and the ratio MCP / gRPC.

    bench/.venv/bin/python -m bench.mcp_agent [--calls 200] [--reps 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time

from bench.common import ROOT, workdir
from tests.mcp_server.conftest import mcp_address, mcp_session
from tests.support.daemon import DaemonProcess
from toolnexus_client import agent, registry
from toolnexus_client.aio import Runtime
from toolnexus_devtools import ScriptedModelServer

GOAL = 1.3


async def _grpc_run(rt: Runtime) -> float:
    start = time.perf_counter()
    handle = await rt.spawn(rt.root, "writer")
    await rt.wake(handle, "say ok")
    result = await rt.wait(handle)
    assert result.status == "done", result
    return time.perf_counter() - start


async def _fused_run(rt: Runtime) -> float:
    """The same run as one call: ``spawn`` with ``prompt`` and ``wait`` (one commit, as MCP's)."""
    start = time.perf_counter()
    woken = await rt.spawn(rt.root, "writer", prompt="say ok", wait=60.0)
    assert woken.result is not None and woken.result.status == "done", woken
    return time.perf_counter() - start


async def _measure(target: str, model_url: str, url: str, calls: int, reps: int) -> dict[str, object]:
    grpc_ms: list[float] = []
    fused_ms: list[float] = []
    mcp_ms: list[float] = []
    # the runtime the MCP listener exposes (--mcp-expose bench): made here, its model the scripted one
    llm = {"style": "openai", "base_url": model_url, "model": "scripted"}
    made = await Runtime.new(target, registry=registry(agent("writer", does="writes")), llm=llm,
                             runtime_id="bench")
    async with made as stub, mcp_session(url, token=None) as session:
        for _ in range(20):  # warm-up
            await _grpc_run(stub)
            await session.call_tool("writer", {"prompt": "say ok"})
        for _ in range(reps):
            g: list[float] = []
            f: list[float] = []
            m: list[float] = []
            for _ in range(calls):
                g.append(await _grpc_run(stub))
                f.append(await _fused_run(stub))
                start = time.perf_counter()
                result = await session.call_tool("writer", {"prompt": "say ok"})
                m.append(time.perf_counter() - start)
                assert not result.is_error, result
            grpc_ms.append(statistics.median(g) * 1000)
            fused_ms.append(statistics.median(f) * 1000)
            mcp_ms.append(statistics.median(m) * 1000)
    grpc_median, mcp_median = statistics.median(grpc_ms), statistics.median(mcp_ms)
    ratio = mcp_median / grpc_median
    fused = statistics.median(fused_ms)
    return {"grpc_spawn_wake_wait_ms": round(grpc_median, 3), "mcp_tools_call_ms": round(mcp_median, 3),
            "grpc_fused_spawn_ms": round(fused, 3), "ratio_to_fused": round(mcp_median / fused, 3),
            "grpc_reps_ms": [round(v, 3) for v in grpc_ms], "mcp_reps_ms": [round(v, 3) for v in mcp_ms],
            "ratio": round(ratio, 3), "goal": GOAL, "met": ratio <= GOAL, "calls": calls, "reps": reps}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    with ScriptedModelServer() as model, workdir() as base:
        proc = DaemonProcess(base / "data", "--mcp-listen", "127.0.0.1:0", "--mcp-expose", "bench",
                             cwd=ROOT).start()
        try:
            out = asyncio.run(_measure(proc.target, model.url, f"http://{mcp_address(proc)}/mcp", args.calls,
                                       args.reps))
        finally:
            proc.stop()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
