"""Registry versions in the engine (docs/versions.md): which New makes a version, what a handle is
pinned to, runtimes stored before versions, and the sweep of versions nobody uses."""

from __future__ import annotations

from dataclasses import replace

from toolnexus_daemon.clock import ManualClock
from toolnexus_daemon.engine import versions
from toolnexus_daemon.engine.verbs.engine import Engine
from toolnexus_daemon.engine.verbs.runtime import Runtime
from toolnexus_daemon.model import (
    JSON,
    ROOT_ID,
    AgentDef,
    LlmConfig,
    LlmStyle,
    RuntimeOptions,
    ToolDef,
    ToolSource,
)
from toolnexus_daemon.store import Batch, MemoryStore

from .conftest import LLM, Bench, FunctionTools, ScriptedModel, new_runtime

A = AgentDef(name="a", does="does a", soul="soul a",
             tools=(ToolDef(name="t", input_schema={"type": "object"}),))
B = AgentDef(name="b", does="does b", soul="soul b")


def _numbers(store: MemoryStore, rid: str) -> list[int]:
    return [int(r["number"]) for r in store.versions(rid)]


async def test_a_differing_registry_makes_a_version_and_an_identical_one_does_not(bench: Bench) -> None:
    first = await bench.engine.new("v", [A, B], LLM, RuntimeOptions())
    assert (first.version.number, first.version.digest) == (1, versions.digest([A, B], LLM))
    again = await bench.engine.new("v", [B, A], LLM, RuntimeOptions(max_turns=3))  # order, options: same
    assert again.version == first.version
    souled = await bench.engine.new("v", [replace(A, soul="new soul"), B], LLM, RuntimeOptions())
    model = await bench.engine.new("v", [replace(A, soul="new soul"), B], replace(LLM, model="other"),
                                   RuntimeOptions())
    assert (souled.version.number, model.version.number) == (2, 3)
    assert _numbers(bench.store, "v") == [1, 2, 3]  # stored once each, with the record that named them


async def test_a_child_takes_its_parents_version_and_a_child_of_root_the_latest(bench: Bench) -> None:
    rt = await new_runtime(bench, "p", A, B)
    parent = await rt.spawn(ROOT_ID, "a")
    await bench.engine.new("p", [replace(A, soul="v2"), B], LLM, RuntimeOptions())
    child = await rt.spawn(parent.id, "b")
    top = await rt.spawn(ROOT_ID, "a")
    assert (parent.version, child.version, top.version) == (1, 1, 2)
    assert rt.agent_of(child).soul == "soul b" and rt.agent_of(parent).soul == "soul a"
    assert rt.agent_of(top).soul == "v2"


async def test_a_runtime_stored_before_versions_loads_as_version_1() -> None:
    store = MemoryStore()
    clock = ManualClock()
    model = ScriptedModel(script=lambda body: {})

    def engine() -> Engine:
        return Engine(store, clock=clock, model_for=lambda llm: model,
                      executors={ToolSource.NATIVE: FunctionTools()})

    first = engine()
    await first.start()
    rt = await new_runtime_on(first, "old", A)
    h = await rt.spawn(ROOT_ID, "a")
    await first.stop()
    # what a daemon before versions wrote: no version in the runtime or handle records, no version rows
    rec = store.get_runtime("old")
    assert rec is not None
    store._runtimes.pop("old")  # noqa: SLF001 - rewriting the stored shape on purpose
    store._versions.clear()  # noqa: SLF001
    handle = store.get_handle("old", h.id)
    assert handle is not None
    await store.commit(_legacy(rec, handle))
    second = engine()
    await second.start()
    try:
        loaded = second.runtime("old")
        assert loaded.version == 1 and loaded.snapshot(h.id).version == 1
        out = await second.new("old", [replace(A, soul="deployed later")], LLM, RuntimeOptions())
        assert out.version.number == 2
        assert _numbers(store, "old") == [1, 2]  # version 1 written with the record of the New
        assert loaded.agent_of(loaded.snapshot(h.id)).soul == "soul a"
    finally:
        await second.stop()


async def test_the_sweep_keeps_every_version_in_use_and_deletes_the_others_after_their_grace(
        bench: Bench) -> None:
    options = RuntimeOptions(version_grace_ms=60_000)
    rt = await new_runtime(bench, "gc", A, version_grace_ms=60_000)  # version 1: only root, which holds none
    await bench.engine.new("gc", [replace(A, soul="v2")], LLM, options)
    kept = await rt.spawn(ROOT_ID, "a")  # pinned to 2
    await _swept(bench)
    for n in (3, 4, 5):
        await bench.engine.new("gc", [replace(A, soul=f"v{n}")], LLM, options)
        await _swept(bench)
    assert _numbers(bench.store, "gc") == [1, 2, 3, 4, 5]  # swept once a minute at most; 1 marked
    bench.clock.advance(61)
    await bench.engine.new("gc", [replace(A, soul="v5")], LLM, options)
    await _swept(bench)
    assert _numbers(bench.store, "gc") == [2, 3, 4, 5]  # 1's grace ran out; 3 and 4 are marked now
    bench.clock.advance(61)
    await bench.engine.new("gc", [replace(A, soul="v5")], LLM, options)
    await _swept(bench)
    assert _numbers(bench.store, "gc") == [2, 5]
    assert rt.agent_of(rt.snapshot(kept.id)).soul == "v2"
    await rt.close(kept.id)  # a closed handle still holds its version: it can be read, not woken
    await rt.purge()
    assert bench.store.versions("gc") == []


async def test_an_upgrading_wake_moves_the_handle_and_its_idle_subtree(bench: Bench) -> None:
    rt = await new_runtime(bench, "up", A, B)
    parent = await rt.spawn(ROOT_ID, "a")
    child = await rt.spawn(parent.id, "b")
    await bench.engine.new("up", [replace(A, soul="v2"), B], LLM, RuntimeOptions())
    bench.model.script = lambda body: {"choices": [{"message": {"role": "assistant", "content": "ok"}}]}
    await rt.wake_for(parent.id, "go", 5000, upgrade=True)
    assert (rt.snapshot(parent.id).version, rt.snapshot(child.id).version) == (2, 2)


def _legacy(rec: JSON, handle: JSON) -> Batch:
    old = {k: v for k, v in rec.items() if k != "version"}
    return Batch(runtimes={"old": old}, handles={("old", handle["id"]): {
        k: v for k, v in handle.items() if k != "version"}})


async def new_runtime_on(engine: Engine, rid: str, *agents: AgentDef) -> Runtime:
    out = await engine.new(rid, list(agents), LlmConfig(style=LlmStyle.WORKER, model="scripted"),
                           RuntimeOptions())
    return engine.runtime(out.runtime_id)


async def _swept(bench: Bench) -> None:
    await bench.engine.settle_background()  # the sweep runs after New returned
