"""Parked handles live on disk: a bounded working set, identity never split, lazy reload."""

from __future__ import annotations

import gc

from toolnexus_daemon.clock import SystemClock
from toolnexus_daemon.engine.cache import HandleCache
from toolnexus_daemon.engine.engine import Engine
from toolnexus_daemon.engine.handle import Handle
from toolnexus_daemon.model import HandleState, Status, ToolSource
from toolnexus_devtools import mock_model

from .conftest import Bench, new_runtime
from .test_single_level import SECRET, secret_action


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
    assert len(rt2.handles) == 1, "only the root is in memory after a restart"
    assert rt2.snapshot(ids[2]).state is HandleState.SUSPENDED
    await again.stop()
