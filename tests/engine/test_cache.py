"""Parked handles live on disk: a bounded working set, identity never split, lazy reload."""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import TypeVar

from toolnexus_daemon.clock import SystemClock
from toolnexus_daemon.engine.state.handle import Handle
from toolnexus_daemon.engine.state.handle_cache import HandleCache
from toolnexus_daemon.engine.verbs.engine import Engine
from toolnexus_daemon.model import (
    JSON,
    AgentDef,
    Answer,
    HandleState,
    LlmConfig,
    LlmStyle,
    RuntimeOptions,
    Status,
    ToolDef,
    ToolSource,
)
from toolnexus_daemon.store import MemoryStore, Store
from toolnexus_devtools import mock_model

from .conftest import Bench, new_runtime
from .test_single_level import SECRET, secret_action

T = TypeVar("T")


def _loader(store: dict[str, int]):  # type: ignore[no-untyped-def]
    def load(hid: str) -> Handle | None:
        store[hid] = store.get(hid, 0) + 1
        return Handle(id=hid, agent="a", parent="root", depth=1)
    return load


def test_only_the_most_recent_handles_are_held() -> None:
    loads: dict[str, int] = {}
    cache = HandleCache(_loader(loads), capacity=2)
    for hid in ("root", "a", "b", "c"):
        cache.get(hid)
    gc.collect()
    assert len(cache) <= 3, "at most capacity (+ the root) stay in memory"
    cache.get("root")
    assert loads["root"] == 1, "the root is never evicted"


def test_a_referenced_handle_keeps_its_identity() -> None:
    loads: dict[str, int] = {}
    cache = HandleCache(_loader(loads), capacity=1)
    held = cache["a"]
    for hid in ("b", "c", "d"):
        cache.get(hid)
    assert cache["a"] is held and loads["a"] == 1, "still referenced: found again, never reloaded"


async def test_a_restarted_engine_loads_parked_handles_lazily(bench: Bench) -> None:
    bench.model.script = mock_model
    bench.tools.functions["secret_action"] = secret_action
    rt = await new_runtime(bench, "lazy", SECRET)
    ids = []
    for _ in range(5):
        h = await rt.spawn("root", "secret")
        await rt.wake(h.id, "go")
        assert (await rt.wait(h.id, 5000)).status is Status.PENDING
        ids.append(h.id)
    await bench.engine.stop()
    again = Engine(bench.store, clock=SystemClock(), model_for=lambda llm: bench.model,
                   executors={ToolSource.NATIVE: bench.tools})
    await again.start()
    rt2 = again.runtime("lazy")
    assert len(list(rt2.table.loaded())) == 1, "only the root is in memory after a restart"
    assert rt2.snapshot(ids[2]).state is HandleState.SUSPENDED
    await again.stop()


class ReadWatchingStore(MemoryStore):
    """Records every handle or checkpoint read made directly, not through ``Store.read`` (on a
    database, a direct read holds the event loop for a round trip)."""

    def __init__(self) -> None:
        super().__init__()
        self.direct: list[tuple[str, str]] = []
        self._inside = 0

    async def read(self, work: Callable[[Store], T]) -> T:
        self._inside += 1
        try:
            return await super().read(work)
        finally:
            self._inside -= 1

    def get_handle(self, runtime_id: str, handle_id: str) -> JSON | None:
        if not self._inside:
            self.direct.append(("handle", handle_id))
        return super().get_handle(runtime_id, handle_id)

    def get_checkpoint(self, runtime_id: str, handle_id: str) -> JSON | None:
        if not self._inside:
            self.direct.append(("checkpoint", handle_id))
        return super().get_checkpoint(runtime_id, handle_id)


async def test_an_answer_to_a_handle_parked_on_disk_loads_it_through_store_read(bench: Bench) -> None:
    store = ReadWatchingStore()
    bench.model.script = mock_model
    bench.tools.functions["secret_action"] = secret_action
    engine = Engine(store, clock=SystemClock(), model_for=lambda llm: bench.model,
                    executors={ToolSource.NATIVE: bench.tools})
    await engine.start()
    await engine.new("parked", [AgentDef(name="secret", tools=(ToolDef(name="secret_action"),))],
                     LlmConfig(style=LlmStyle.WORKER), RuntimeOptions())
    first = engine.runtime("parked")
    h = await first.spawn("root", "secret")
    await first.wake(h.id, "go")
    pending = (await first.wait(h.id, 5000)).pending
    assert pending is not None
    await engine.stop()
    again = Engine(store, clock=SystemClock(), model_for=lambda llm: bench.model,
                   executors={ToolSource.NATIVE: bench.tools})
    await again.start()
    try:
        rt = again.runtime("parked")
        assert rt.table.peek(h.id) is None, "parked on disk after the restart"
        store.direct.clear()
        outcome = await rt.resume(Answer(pending.id, ok=True))
        assert outcome.result is not None and outcome.result.status is Status.DONE
        assert [r for r in store.direct if r[1] == h.id] == [], "the parked handle was read on the event loop"
    finally:
        await again.stop()
