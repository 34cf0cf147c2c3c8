"""Fused wakes: Spawn+Wake in one commit, and a wake that waits for its turn's result."""

from __future__ import annotations

import asyncio

import pytest

from toolnexus_daemon.clock import SystemClock
from toolnexus_daemon.engine.verbs.engine import Engine
from toolnexus_daemon.engine.verbs.runtime import Runtime
from toolnexus_daemon.errors import FailedPrecondition, NotFound
from toolnexus_daemon.llm.base import ModelReply, ModelRequest, reply_from_openai
from toolnexus_daemon.model import (
    AgentDef,
    Budget,
    EventType,
    HandleState,
    LlmConfig,
    LlmStyle,
    RuntimeOptions,
    Status,
)
from toolnexus_daemon.store import Batch, MemoryStore
from toolnexus_devtools import chat_response


class CountingStore(MemoryStore):
    """Counts store transactions: what one synced commit each costs on a durable store."""

    def __init__(self) -> None:
        super().__init__()
        self.transactions = 0

    async def commit(self, batch: Batch) -> None:
        self.transactions += 1
        await super().commit(batch)


class GatedModel:
    """Answers ``ok`` once ``gate`` is set, so a turn stays running until the test lets it end."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()

    async def complete(self, request: ModelRequest) -> ModelReply:
        await self.gate.wait()
        return reply_from_openai(chat_response(content=f"ok: {request.body['messages'][-1]['content']}"))

    async def aclose(self) -> None:
        return None


async def _runtime(store: CountingStore, model: GatedModel, *agents: AgentDef) -> Runtime:
    engine = Engine(store, clock=SystemClock(), model_for=lambda llm: model, executors={})
    await engine.new("f", [AgentDef(name="a"), *agents], LlmConfig(style=LlmStyle.WORKER), RuntimeOptions())
    return engine.runtime("f")


async def test_a_fused_spawn_is_one_commit_where_spawn_then_wake_is_two() -> None:
    store, model = CountingStore(), GatedModel()
    rt = await _runtime(store, model)
    before = store.transactions
    woken = await rt.spawn_awake("root", "a", None, "hi", 0)
    fused = store.transactions - before
    assert (woken.handle, woken.queued, woken.wait) == ("root/a.1", False, None)
    assert rt.snapshot(woken.handle).state is HandleState.RUNNING

    before = store.transactions
    h = await rt.spawn("root", "a")
    await rt.wake(h.id, "hi")
    assert (fused, store.transactions - before) == (1, 2)
    events = [(e.type, e.to_state) for e in store.events("f", 0, 100) if e.handle == woken.handle]
    assert events[:2] == [(EventType.SPAWNED, ""), (EventType.TRANSITION, "running")]
    model.gate.set()


async def test_wake_for_returns_the_result_of_the_turn_it_started() -> None:
    model = GatedModel()
    rt = await _runtime(CountingStore(), model)
    h = await rt.spawn("root", "a")
    woken = await rt.wake_for(h.id, "go", 5000)
    assert woken.wait is not None and h.live.waiting == 1, "the waiter is registered before the wake returns"
    model.gate.set()  # the turn may settle before the caller awaits: the registered waiter still sees it
    await asyncio.sleep(0.05)
    result = await woken.wait.result()
    assert (result.status, result.text) == (Status.DONE, "ok: go")
    assert h.live.waiting == 0


async def test_a_fused_wait_times_out_like_wait() -> None:
    rt = await _runtime(CountingStore(), GatedModel())
    woken = await rt.spawn_awake("root", "a", None, "slow", 30)
    assert woken.wait is not None
    result = await woken.wait.result()
    assert (result.status, result.text) == (Status.TIMEOUT, "wait timeout after 30ms (child still running)")


async def test_a_queued_fused_wake_waits_for_the_turn_that_consumes_it() -> None:
    model = GatedModel()
    parent_def = AgentDef(name="p", team=("a",), budget=Budget(max_concurrent=1))
    rt = await _runtime(CountingStore(), model, parent_def)
    parent = await rt.spawn("root", "p")
    first = await rt.spawn_awake(parent.id, "a", None, "first", 0)
    second = await rt.spawn_awake(parent.id, "a", None, "second", 5000)
    assert (first.queued, second.queued) == (False, True)
    assert rt.snapshot(second.handle).state is HandleState.IDLE
    model.gate.set()
    assert second.wait is not None
    result = await second.wait.result()
    assert (result.status, result.text) == (Status.DONE, "ok: second")


async def test_a_refused_wake_leaves_no_waiter_and_a_bad_spawn_no_handle() -> None:
    model = GatedModel()
    rt = await _runtime(CountingStore(), model)
    h = (await rt.spawn_awake("root", "a", None, "go", 0)).handle
    with pytest.raises(FailedPrecondition, match="is running"):
        await rt.wake_for(h, "again", 1000)
    assert rt.snapshot(h).live.waiting == 0
    with pytest.raises(NotFound, match='unknown agent "zz"'):
        await rt.spawn_awake("root", "zz", None, "go", 1000)
    assert [c.id for c in rt.list()] == [h]
    model.gate.set()
