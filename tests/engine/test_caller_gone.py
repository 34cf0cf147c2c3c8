"""A verb whose caller goes away while its commit syncs still does what that commit promises
(``engine/detached.py``): gRPC cancels a call's handler when the client's deadline passes, its
connection drops or a forwarding daemon dies, and the cluster chaos run found a Resume cancelled
there — its answer durable, its turn never launched, the handle ``running`` with nothing behind
it until a restart. Each test cancels the caller while the store holds the commit, then lets
the commit land, and checks the outcome a caller that stayed would have had."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

import pytest

from toolnexus_daemon.clock import SystemClock
from toolnexus_daemon.engine.verbs.engine import Engine
from toolnexus_daemon.engine.verbs.runtime import Runtime
from toolnexus_daemon.model import (
    JSON,
    AgentDef,
    Answer,
    HandleState,
    LlmConfig,
    LlmStyle,
    Request,
    RuntimeOptions,
    Status,
    ToolDef,
    ToolResult,
    ToolSource,
)
from toolnexus_daemon.store import Batch
from toolnexus_daemon.tools.base import ToolInvocation
from toolnexus_devtools.model_server import chat_response, tool_call

from .conftest import FunctionTools, ScriptedModel
from .test_landing import HeldStore

LLM = LlmConfig(style=LlmStyle.WORKER, model="scripted")


class EnteringStore(HeldStore):
    """A ``HeldStore`` that counts the commits that reached it (held or not)."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = 0

    async def commit(self, batch: Batch) -> None:
        self.entered += 1
        await super().commit(batch)


def approve(args: JSON, inv: ToolInvocation) -> ToolResult:
    if inv.answer is None:
        return ToolResult(output="", pending=Request(id="go-ahead", kind="approval", prompt="approve?"))
    return ToolResult(output="action performed")


def calls_approve_once(body: JSON) -> JSON:
    messages = body.get("messages") or []
    if messages and messages[-1].get("role") == "tool":
        return chat_response(content=str(messages[-1].get("content") or ""))
    return chat_response(tool_calls=[tool_call("approve", {})])


@pytest.fixture
async def held() -> Any:
    store = EnteringStore()
    model = ScriptedModel(script=calls_approve_once)
    engine = Engine(store, clock=SystemClock(), model_for=lambda llm: model,
                    executors={ToolSource.NATIVE: FunctionTools({"approve": approve})})
    yield store, model, engine
    store.hold = None
    await engine.stop()


async def _runtime(engine: Engine) -> Runtime:
    await engine.new("gone", [AgentDef(name="a", tools=(ToolDef(name="approve"),))], LLM, RuntimeOptions())
    return engine.runtime("gone")


async def _cancel_while_held(store: HeldStore, call: Awaitable[Any], until: Any) -> None:
    """Start ``call`` with the store holding commits, wait until ``until()`` (its change is made and
    queued), cancel the caller, then let the commit land."""
    store.hold = asyncio.Event()
    task = asyncio.ensure_future(call)
    for _ in range(500):
        if until():
            break
        await asyncio.sleep(0.002)
    assert until(), "the call never reached its commit"
    await asyncio.sleep(0.01)  # the commit is queued and waits on the store
    assert not task.done()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    store.hold.set()


async def test_a_resume_whose_caller_left_during_its_commit_still_runs_the_turn(held: Any) -> None:
    store, _, engine = held
    rt = await _runtime(engine)
    h = (await rt.spawn("root", "a")).id
    await rt.wake(h, "do it")
    assert (await rt.wait(h, 5000)).status is Status.PENDING
    await _cancel_while_held(store, rt.resume(Answer("go-ahead", ok=True)),
                             lambda: rt.snapshot(h).state is HandleState.RUNNING)
    result = await rt.wait(h, 5000)
    assert (result.status, result.text) == (Status.DONE, "action performed")
    assert rt.snapshot(h).state is HandleState.IDLE


@pytest.mark.parametrize("verb, after, status", [("interrupt", HandleState.IDLE, Status.INTERRUPTED),
                                                  ("close", HandleState.CLOSED, Status.CLOSED)])
async def test_a_stop_whose_caller_left_during_its_commit_still_settles_the_waiters(
        held: Any, verb: str, after: HandleState, status: Status) -> None:
    store, model, engine = held
    rt = await _runtime(engine)
    h = (await rt.spawn("root", "a")).id
    model.gate = asyncio.Event()  # the turn stays in its model call
    await rt.wake(h, "do it")
    waiting = asyncio.ensure_future(rt.wait(h, 0))
    await asyncio.sleep(0.01)
    stop = rt.interrupt(h) if verb == "interrupt" else rt.close(h)
    await _cancel_while_held(store, stop, lambda: rt.snapshot(h).state is after)
    result = await asyncio.wait_for(waiting, 5)
    assert result.status is status
    assert rt.snapshot(h).task is None
    assert (store.get_handle("gone", h) or {}).get("state") == str(after)


async def test_a_new_whose_caller_left_during_its_commit_is_still_served(held: Any) -> None:
    store, _, engine = held
    agents = [AgentDef(name="a", tools=(ToolDef(name="approve"),))]
    before = store.entered
    await _cancel_while_held(store, engine.new("late", agents, LLM, RuntimeOptions()),
                             lambda: store.entered > before)
    for _ in range(500):
        if engine.holds("late"):
            break
        await asyncio.sleep(0.002)
    rt = engine.runtime("late")  # NOT_FOUND before: the record was durable, the runtime unserved
    assert store.get_runtime("late") is not None
    h = (await rt.spawn("root", "a")).id
    await rt.wake(h, "do it")
    assert (await rt.wait(h, 5000)).status is Status.PENDING
