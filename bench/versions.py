"""Registry versions at scale: New, Resume and a restart with 1,000 versions beside one (``ver``).

    .venv/bin/python -m bench.versions                                # 1,000 versions, 100,000 parked
    .venv/bin/python -m bench.versions --versions 100 --handles 10000 # a quicker look

Two runtimes are built on one real LMDB store, in process (the engine as the daemon runs it,
without gRPC, whose cost per call does not depend on versions): ``one`` keeps a single registry
version, ``many`` gets ``--versions`` of them, each ``New`` with another soul and tool schema.
Each has one handle genuinely parked on a native tool under version 1 (the one that is resumed)
and ``--handles`` parked handle records written straight into the store as the engine writes
them, pinned to versions spread evenly over the runtime's versions. Reported, each the median of
``--calls`` runs where it repeats:

  new_same_ms       a New with the latest registry again (no new version)
  new_version_ms    a New that makes a new version
  resume_ms         the Resume of the version-1 handle after a restart (reads version 1 back)
  restart_ms        a new engine's start (the runtime record, the latest version, recovery)
  store_bytes       the store's size; ``per_version_bytes`` what each extra version added

``ratio`` divides ``many`` by ``one`` (the goal: at most 1.1 for New, Resume and restart); the
store grows with distinct versions, not with handles (``per_version_bytes`` against the
size of the records the parked handles take).
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
from toolnexus_daemon.store import Batch, LmdbStore
from toolnexus_daemon.tools.base import ToolInvocation
from toolnexus_devtools import mock_model

LLM = LlmConfig(style=LlmStyle.WORKER, model="bench")
BATCH = 2000
MAP_SIZE = 8 << 30


class Model:
    """The reference mock model (call the first tool once, then answer with its output)."""

    async def complete(self, request: ModelRequest) -> ModelReply:
        return reply_from_openai(mock_model(request.body))

    async def aclose(self) -> None:
        return None


class Charge:
    """A native tool that asks before it acts, answered in process."""

    async def invoke(self, inv: ToolInvocation) -> ToolResult:
        if inv.answer is None:
            return ToolResult(output="", pending=Request(id=f"charge:{inv.handle}", kind="approval",
                                                         prompt="charge?"))
        return ToolResult(output=f"charged ({inv.version})")

    async def aclose(self) -> None:
        return None


def cashier(n: int) -> AgentDef:
    schema = {"type": "object", "properties": {f"amount_{n}": {"type": "number"}}}
    return AgentDef(name="cashier", does="charges cards", soul=f"You charge cards (build {n}).",
                    tools=(ToolDef(name="charge", input_schema=schema),))


def engine(store: LmdbStore) -> Engine:
    return Engine(store, clock=SystemClock(), model_for=lambda llm: Model(),
                  executors={ToolSource.NATIVE: Charge()})


def parked(rid: str, n: int, version: int) -> tuple[tuple[str, str], dict[str, Any]]:
    hid = f"root/cashier.{n}"
    return (rid, hid), {"id": hid, "agent": "cashier", "state": "suspended", "parent": "root", "depth": 1,
                        "wake_queue": [], "escalating": False, "suspended_at": 1.0 + n * 1e-3,
                        "version": version,
                        "pending": {"id": f"q-{n}", "kind": "approval", "prompt": "charge?"}}


async def timed(call: Callable[[], Awaitable[object]]) -> float:
    started = time.perf_counter()
    await call()
    return (time.perf_counter() - started) * 1000


async def build(eng: Engine, store: LmdbStore, rid: str, versions: int, handles: int,
                real: int) -> list[tuple[str, str]]:
    """The runtime ``rid`` with ``versions`` versions, ``real`` version-1 handles parked for real,
    and ``handles`` parked records spread over its versions; returns (handle, request) to answer."""
    options = RuntimeOptions(tool_timeout_ms=5000)
    await eng.new(rid, [cashier(1)], LLM, options)
    rt = eng.runtime(rid)
    asked = []
    for _ in range(real):
        h = await rt.spawn("root", "cashier")
        await rt.wake(h.id, "charge 10")
        pending = (await rt.wait(h.id, 10_000)).pending
        assert pending is not None
        asked.append((h.id, pending.id))
    for n in range(2, versions + 1):
        await eng.new(rid, [cashier(n)], LLM, options)
    for first in range(0, handles, BATCH):
        last = min(first + BATCH, handles)
        rows = dict(parked(rid, 1000 + i, 1 + i % versions) for i in range(first, last))
        await store.commit(Batch(handles=rows))
    await eng.settle_background()
    return asked


async def measure(path: Path, rid: str, versions: int, handles: int, calls: int) -> dict[str, Any]:
    store = LmdbStore(path, map_size=MAP_SIZE, sync=False)
    eng = engine(store)
    await eng.start()
    before = store.info().size_bytes
    asked = await build(eng, store, rid, versions, handles, calls)
    built = store.info().size_bytes
    options = RuntimeOptions(tool_timeout_ms=5000)
    same = []
    for _ in range(calls):
        same.append(await timed(lambda: eng.new(rid, [cashier(versions)], LLM, options)))
        await eng.settle_background()  # timed alone, not beside a sweep still reading on a thread
    made = []
    for i in range(calls):
        made.append(await timed(lambda i=i: eng.new(rid, [cashier(versions + 1 + i)], LLM, options)))
        await eng.settle_background()  # the reattach events and the sweep a New leaves running
    await eng.stop()
    store.close()
    restarts = []
    for _ in range(calls):
        store = LmdbStore(path, map_size=MAP_SIZE, sync=False)
        eng = engine(store)
        restarts.append(await timed(eng.start))
        await eng.stop()
        store.close()
    store = LmdbStore(path, map_size=MAP_SIZE, sync=False)
    eng = engine(store)
    await eng.start()
    rt = eng.runtime(rid)
    resumes = []
    for handle, request_id in asked:
        resumes.append(await timed(lambda request_id=request_id: rt.resume(Answer(request_id, ok=True))))
        result = await rt.wait(handle, 5000)
        assert result.text == "charged (1)", result  # finished on version 1
    size = store.info().size_bytes
    await eng.stop()
    store.close()
    return {"versions": versions + calls, "handles": handles, "new_same_ms": statistics.median(same),
            "new_version_ms": statistics.median(made), "restart_ms": statistics.median(restarts),
            "resume_ms": statistics.median(resumes), "first_resume_ms": resumes[0], "store_bytes": size,
            "built_bytes": built - before}


async def run(versions: int, handles: int, calls: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="tnx-bench-versions-") as tmp:
        one = await measure(Path(tmp) / "one", "one", 1, handles, calls)
        many = await measure(Path(tmp) / "many", "many", versions, handles, calls)
    timed_keys = ("new_same_ms", "new_version_ms", "restart_ms", "resume_ms")
    ratio = {k: round(many[k] / one[k], 3) for k in timed_keys if one[k]}
    per_version = (many["built_bytes"] - one["built_bytes"]) / max(versions - 1, 1)
    return {"one": one, "many": many, "ratio": ratio, "per_version_bytes": round(per_version),
            "per_handle_bytes": round(one["built_bytes"] / max(handles, 1))}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--versions", type=int, default=1000)
    p.add_argument("--handles", type=int, default=100_000)
    p.add_argument("--calls", type=int, default=5)
    ns = p.parse_args(argv)
    out = asyncio.run(run(ns.versions, ns.handles, ns.calls))
    json.dump(out, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
