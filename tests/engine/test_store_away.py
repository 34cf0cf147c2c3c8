"""A store that cannot be reached mid-turn (its database is down), on any store: the engine stops the
runtime's turns and, once the store answers again, continues them from their last checkpoints,
exactly as recovery after a restart does (``engine/lifetime.py``, ``heal``).

The store here is the in-memory one with an outage switch: while away, every commit and every
read fails with ``StoreUnavailable``, as PostgreSQL's link does. What must hold: a reply that
arrives during the outage neither ends the turn nor leaves the handle ``running`` with no turn;
waiters registered before hear the turn's real end; the handle takes the next wake; a nested
turn (a parent waiting on its ``task`` child) ends too; a failure that cannot be recorded is
not reported; an answer given during the outage is refused UNAVAILABLE and nothing is lost.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from tests.engine.conftest import FunctionTools
from toolnexus_daemon.clock import SystemClock
from toolnexus_daemon.engine.verbs.engine import Engine
from toolnexus_daemon.engine.verbs.runtime import Runtime
from toolnexus_daemon.errors import FailedPrecondition, StoreUnavailable
from toolnexus_daemon.llm.base import ModelError, ModelReply, ModelRequest, reply_from_openai
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
from toolnexus_daemon.store import Batch, MemoryStore
from toolnexus_devtools.model_server import chat_response, tool_call

# the reads the engine makes; each fails while the store is away
READS = ("get_runtime", "handles", "handles_to_recover", "get_handle", "get_handles", "messages",
         "get_checkpoint", "get_request", "events", "last_seq")
# how long a test waits for the turns to end once the store is back (the heal looks every <= 2 s)
WITHIN_S = 10.0


class AwayStore(MemoryStore):
    """The memory store with an outage switch (``away``): commits and reads raise ``StoreUnavailable``."""

    def __init__(self) -> None:
        super().__init__()
        self.away = False
        # when set, a commit waits for it before it looks whether the store is away
        self.hold: asyncio.Event | None = None
        for name in READS:
            setattr(self, name, self._guarded(getattr(super(), name)))

    def _guarded(self, read: Callable[..., Any]) -> Callable[..., Any]:
        def guarded(*args: Any, **kwargs: Any) -> Any:
            self._check()
            return read(*args, **kwargs)
        return guarded

    def _check(self) -> None:
        if self.away:
            raise StoreUnavailable("the test database is unreachable; retry shortly")

    async def commit(self, batch: Batch) -> None:
        if self.hold is not None:
            await self.hold.wait()
        self._check()
        await super().commit(batch)


class HeldModel:
    """Answers from ``script``; while ``gate`` is clear every call waits for it. ``fail_next``
    makes the next call fail as a provider error would."""

    def __init__(self, script: Callable[[JSON], JSON]) -> None:
        self.script = script
        self.gate = asyncio.Event()
        self.gate.set()
        self.asked: list[JSON] = []
        self.fail_next = False

    async def complete(self, request: ModelRequest) -> ModelReply:
        self.asked.append(request.body)
        await self.gate.wait()
        if self.fail_next:
            self.fail_next = False
            raise ModelError("the provider answered 503 (test)")
        return reply_from_openai(self.script(request.body))

    async def aclose(self) -> None:
        return None


def script(body: JSON) -> JSON:
    """A ``task`` agent delegates to ``helper``; ``approve`` agents call ``approve``; a tool result
    or a plain agent is answered with text."""
    messages = body["messages"]
    names = [t["function"]["name"] for t in body.get("tools") or []]
    if messages[-1]["role"] == "tool":
        return chat_response(content=f"finished: {messages[-1]['content']}")
    if "task" in names:
        return chat_response(tool_calls=[tool_call("task", {"agent": "helper", "prompt": "help"})])
    if "approve" in names:
        return chat_response(tool_calls=[tool_call("approve", {})])
    return chat_response(content="ok")


def approve(args: JSON, inv: Any) -> ToolResult:
    if inv.answer is None:
        return ToolResult(output="", pending=Request(id="ap-1", kind="approval", prompt="approve?"))
    return ToolResult(output="approved")


AGENTS = [AgentDef(name="talker"), AgentDef(name="helper"), AgentDef(name="boss", team=("helper",)),
          AgentDef(name="asker", tools=(ToolDef(name="approve"),))]


@pytest.fixture
async def setup() -> AsyncIterator[tuple[AwayStore, HeldModel, Runtime]]:
    store, model = AwayStore(), HeldModel(script)
    engine = Engine(store, clock=SystemClock(), model_for=lambda llm: model,  # type: ignore[arg-type,return-value]
                    executors={ToolSource.NATIVE: FunctionTools({"approve": approve})})
    await engine.new("o", AGENTS, LlmConfig(style=LlmStyle.WORKER), RuntimeOptions())
    yield store, model, engine.runtime("o")
    store.away = False
    await engine.stop()


async def asked(model: HeldModel, n: int) -> None:
    for _ in range(1000):
        if len(model.asked) >= n:
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"the model was asked {len(model.asked)} times, not {n}")


async def outage_during_reply(store: AwayStore, model: HeldModel) -> None:
    """The reply is released while the store is away, its commit is refused; then the store is back."""
    store.away = True
    model.gate.set()
    await asyncio.sleep(0.2)
    store.away = False


async def test_a_reply_during_an_outage_is_redone_once_the_store_is_back(
        setup: tuple[AwayStore, HeldModel, Runtime]) -> None:
    store, model, rt = setup
    h = await rt.spawn("root", "talker")
    model.gate.clear()
    await rt.wake(h.id, "hello")
    waiting = asyncio.ensure_future(rt.wait(h.id))
    await asked(model, 1)

    await outage_during_reply(store, model)

    result = await asyncio.wait_for(waiting, WITHIN_S)
    assert (result.status, result.text) == (Status.DONE, "ok")
    assert len(model.asked) == 2  # asked again: its reply was never recorded
    assert store.messages("o", h.id)[-1]["content"] == "ok"
    assert [m["role"] for m in store.messages("o", h.id)] == ["user", "assistant"]
    assert await rt.wake(h.id, "again") is False  # idle: the next wake is taken
    assert (await rt.wait(h.id, 5000)).status is Status.DONE


async def test_a_wake_while_the_turn_waits_for_the_store_is_refused_as_running_not_lost(
        setup: tuple[AwayStore, HeldModel, Runtime]) -> None:
    store, model, rt = setup
    h = await rt.spawn("root", "talker")
    model.gate.clear()
    await rt.wake(h.id, "hello")
    await asked(model, 1)
    store.away = True
    model.gate.set()
    await asyncio.sleep(0.1)
    with pytest.raises(StoreUnavailable):
        await rt.wake(h.id, "meanwhile")  # the store cannot be read: UNAVAILABLE, not a guess
    store.away = False
    with pytest.raises(FailedPrecondition, match="running"):
        await rt.wake(h.id, "meanwhile")  # its turn is being continued
    assert (await rt.wait(h.id, int(WITHIN_S * 1000))).status is Status.DONE


async def test_a_nested_turn_ends_for_parent_and_child(setup: tuple[AwayStore, HeldModel, Runtime]) -> None:
    """The child's reply (which also updates its parent's usage) is refused: parent and child are
    both continued; the parent's ``task`` call reattaches to the child, never a second one."""
    store, model, rt = setup
    boss = await rt.spawn("root", "boss")
    await rt.wake(boss.id, "delegate")
    await asked(model, 1)
    model.gate.clear()  # the boss's step runs the task: the helper's call is held
    await asked(model, 2)

    await outage_during_reply(store, model)

    result = await rt.wait(boss.id, int(WITHIN_S * 1000))
    assert (result.status, result.text) == (Status.DONE, "finished: ok"), result
    assert [c for c in rt.snapshot(boss.id).children] == [f"{boss.id}/helper.1"]


async def test_a_failure_that_cannot_be_recorded_is_not_reported_and_the_turn_is_redone(
        setup: tuple[AwayStore, HeldModel, Runtime]) -> None:
    store, model, rt = setup
    h = await rt.spawn("root", "talker")
    model.gate.clear()
    model.fail_next = True
    await rt.wake(h.id, "hello")
    waiting = asyncio.ensure_future(rt.wait(h.id))
    await asked(model, 1)

    await outage_during_reply(store, model)

    result = await asyncio.wait_for(waiting, WITHIN_S)
    assert (result.status, result.text) == (Status.DONE, "ok")  # the failure was never recorded


async def test_a_suspension_during_an_outage_is_parked_once_the_store_is_back(
        setup: tuple[AwayStore, HeldModel, Runtime]) -> None:
    store, model, rt = setup
    h = await rt.spawn("root", "asker")
    model.gate.clear()
    await rt.wake(h.id, "ask")
    waiting = asyncio.ensure_future(rt.wait(h.id))
    await asked(model, 1)

    await outage_during_reply(store, model)

    pending = await asyncio.wait_for(waiting, WITHIN_S)
    assert pending.status is Status.PENDING and pending.pending is not None
    assert rt.snapshot(h.id).state is HandleState.SUSPENDED


async def test_an_answer_during_an_outage_is_unavailable_and_nothing_is_lost(
        setup: tuple[AwayStore, HeldModel, Runtime]) -> None:
    store, model, rt = setup
    h = await rt.spawn("root", "asker")
    await rt.wake(h.id, "ask")
    pending = await rt.wait(h.id, 5000)
    assert pending.status is Status.PENDING and pending.pending is not None
    store.away = True
    with pytest.raises(StoreUnavailable):
        await rt.resume(Answer(pending.pending.id, ok=True))
    store.away = False
    assert rt.snapshot(h.id).state is HandleState.SUSPENDED
    resumed = await rt.resume(Answer(pending.pending.id, ok=True))
    assert resumed.result is not None and resumed.result.text == "finished: approved"
    assert not resumed.duplicate


async def test_wait_never_reports_a_result_whose_commit_the_outage_refused(
        setup: tuple[AwayStore, HeldModel, Runtime]) -> None:
    """Wait saw the settled result in memory while its commit was on its way; the commit was then
    refused: the answer is UNAVAILABLE (the result was never recorded), not that result."""
    store, model, rt = setup
    h = await rt.spawn("root", "talker")
    model.gate.clear()
    await rt.wake(h.id, "hello")
    await asked(model, 1)
    store.hold = asyncio.Event()
    model.gate.set()  # the reply settles the turn in memory; its commit is held
    for _ in range(1000):
        if rt.snapshot(h.id).state is HandleState.IDLE:
            break
        await asyncio.sleep(0.005)
    waiting = asyncio.ensure_future(rt.wait(h.id))
    await asyncio.sleep(0.05)
    store.away = True
    store.hold.set()
    with pytest.raises(StoreUnavailable):
        await asyncio.wait_for(waiting, 5)
    store.hold, store.away = None, False
    result = await rt.wait(h.id, int(WITHIN_S * 1000))
    assert (result.status, result.text) == (Status.DONE, "ok")
    assert len(model.asked) == 2
