"""The benchmark cycle on the engine alone, in this process: no gRPC, no worker, no client.

    python -m bench.inprocess            # synced and --no-sync LMDB, median of 200 cycles each

What is left of the daemon's cycle without crossing processes: the engine, its
commits and their fsyncs. Compared with scenario 1 it shows how much of the
cycle is the crossings (see "The misses" in bench/README.md).
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time

from toolnexus_daemon.clock import SystemClock
from toolnexus_daemon.engine.verbs.engine import Engine
from toolnexus_daemon.llm.base import ModelReply, ModelRequest, reply_from_openai
from toolnexus_daemon.model import (
    AgentDef,
    Answer,
    LlmConfig,
    LlmStyle,
    Request,
    RuntimeOptions,
    ToolDef,
    ToolResult,
    ToolSource,
)
from toolnexus_daemon.store import LmdbStore
from toolnexus_daemon.tools.base import ToolInvocation
from toolnexus_devtools import mock_model

CYCLES, WARMUP = 200, 30


class MockModel:
    async def complete(self, request: ModelRequest) -> ModelReply:
        return reply_from_openai(mock_model(request.body))

    async def aclose(self) -> None:
        return None


class SecretAction:
    async def invoke(self, inv: ToolInvocation) -> ToolResult:
        if inv.answer is None:
            return ToolResult(output="", pending=Request(id="", kind="approval", prompt="approve?"))
        return ToolResult(output="action performed")


async def cycles(sync: bool) -> float:
    store = LmdbStore(tempfile.mkdtemp(prefix="tnx-inproc-"), sync=sync)
    model = MockModel()
    engine = Engine(store, clock=SystemClock(), model_for=lambda llm: model,
                    executors={ToolSource.NATIVE: SecretAction()})
    agent = AgentDef(name="operator", tools=(ToolDef(name="secret_action"),))
    out = await engine.new("", [agent], LlmConfig(style=LlmStyle.WORKER, model="mock"), RuntimeOptions())
    rt = engine.runtime(out.runtime_id)

    async def cycle() -> None:
        h = await rt.spawn("root", "operator")
        await rt.wake(h.id, "please perform the secret action")
        pending = await rt.wait(h.id, 5000)
        assert pending.pending is not None
        await rt.resume(Answer(pending.pending.id, ok=True))

    try:
        for _ in range(WARMUP):
            await cycle()
        times = []
        for _ in range(CYCLES):
            t0 = time.perf_counter()
            await cycle()
            times.append(time.perf_counter() - t0)
        return statistics.median(times) * 1e3
    finally:
        await engine.stop()
        store.close()


def main() -> None:
    for sync in (True, False):
        print(f"in-process cycle, {'synced' if sync else '--no-sync'} LMDB: "
              f"{asyncio.run(cycles(sync)):.3f} ms")


if __name__ == "__main__":
    main()
