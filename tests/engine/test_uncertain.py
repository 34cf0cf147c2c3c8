"""Calls of ``on_crash: "ask"`` tools whose outcome is unknown (docs/protocol.md §11), in the engine:
recorded in flight before dispatch, asked about after a restart instead of being sent again, a
re-run that is itself cut short asked about again (a new request), a deadline that passes asked
about too."""

from __future__ import annotations

import asyncio

from toolnexus_daemon.clock import SystemClock
from toolnexus_daemon.engine.verbs.engine import Engine
from toolnexus_daemon.model import (
    JSON,
    AgentDef,
    Answer,
    OnCrash,
    Request,
    Status,
    TaskResult,
    ToolDef,
    ToolResult,
    ToolSource,
)
from toolnexus_daemon.tools.base import ToolInvocation
from toolnexus_devtools import mock_model

from .conftest import Bench, new_runtime

PAYER = AgentDef(name="payer", does="charges cards", tools=(ToolDef(name="charge", on_crash=OnCrash.ASK),))


async def _restart(bench: Bench, engine: Engine) -> Engine:
    """Stop ``engine`` as a kill would (turns stop at their last commit); a new one starts."""
    await engine.stop()
    again = Engine(bench.store, clock=SystemClock(), model_for=lambda llm: bench.model,
                   executors={ToolSource.NATIVE: bench.tools})
    await again.start()
    return again


def _reconcile(result: TaskResult) -> JSON:
    assert result.status is Status.PENDING and result.pending is not None, result
    assert (result.pending.kind, result.pending.prompt) == ("reconcile", "did charge complete?")
    assert result.pending.data is not None
    return {"id": result.pending.id, **result.pending.data}


async def test_a_rerun_cut_short_again_is_asked_about_again_then_declined(bench: Bench) -> None:
    dispatched = asyncio.Event()

    async def charge(args: JSON, inv: ToolInvocation) -> ToolResult:
        dispatched.set()
        await asyncio.Event().wait()  # in flight when the daemon goes down
        return ToolResult(output="unreachable")

    bench.model.script = mock_model
    bench.tools.functions["charge"] = charge
    rt = await new_runtime(bench, "pay", PAYER)
    h = await rt.spawn("root", "payer")
    await rt.wake(h.id, "charge it")
    await asyncio.wait_for(dispatched.wait(), 5)
    call_id = bench.tools.ledger[0].call_id

    engine = await _restart(bench, bench.engine)
    try:
        first = _reconcile(await engine.runtime("pay").wait(h.id, 5000))
        assert (first["call_id"], first["tool"], first["arguments"]) == (call_id, "charge", {})
        assert len(bench.tools.ledger) == 1, "not sent again before anyone answered"
        dispatched.clear()
        await engine.runtime("pay").resume(Answer(first["id"], ok=True), no_wait=True)
        await asyncio.wait_for(dispatched.wait(), 5)
        assert [inv.call_id for inv in bench.tools.ledger] == [call_id, call_id]
        assert bench.tools.ledger[1].answer is None, "a re-run is the call again, not an answered one"

        engine = await _restart(bench, engine)
        second = _reconcile(await engine.runtime("pay").wait(h.id, 5000))
        assert second["call_id"] == call_id and second["id"] != first["id"]
        done = await engine.runtime("pay").resume(Answer(second["id"], ok=False))
        assert done.result is not None
        assert (done.result.status, done.result.text) == (Status.DONE, "not completed: charge")
        assert len(bench.tools.ledger) == 2
    finally:
        await engine.stop()


async def test_an_answered_output_is_the_call_s_result_with_its_error_flag(bench: Bench) -> None:
    dispatched = asyncio.Event()

    async def charge(args: JSON, inv: ToolInvocation) -> ToolResult:
        dispatched.set()
        await asyncio.Event().wait()
        return ToolResult(output="unreachable")

    bench.model.script = mock_model
    bench.tools.functions["charge"] = charge
    rt = await new_runtime(bench, "pay", PAYER)
    h = await rt.spawn("root", "payer")
    await rt.wake(h.id, "charge it")
    await asyncio.wait_for(dispatched.wait(), 5)

    engine = await _restart(bench, bench.engine)
    try:
        asked = _reconcile(await engine.runtime("pay").wait(h.id, 5000))
        answer = Answer(asked["id"], ok=True, data={"output": "card declined", "is_error": True})
        done = await engine.runtime("pay").resume(answer)
        assert done.result is not None and done.result.text == "card declined"
        tool_message = [m for m in bench.model.bodies[-1]["messages"] if m["role"] == "tool"]
        assert [m["content"] for m in tool_message] == ["card declined"]
        results = [e.data for e in bench.store.events("pay", 0, 1000) if e.data and "outcome" in e.data]
        assert [r["outcome"] for r in results] == ["pending", "error"]
        assert len(bench.tools.ledger) == 1
    finally:
        await engine.stop()


async def test_an_ask_call_past_its_deadline_is_asked_about(bench: Bench) -> None:
    """The call may have acted after all: a reconcile request, not an error result."""
    async def stuck(args: JSON, inv: ToolInvocation) -> ToolResult:
        await asyncio.Event().wait()
        return ToolResult(output="never")

    agent = AgentDef(name="payer", tools=(ToolDef(name="charge", deadline_ms=1000, on_crash=OnCrash.ASK),))
    bench.model.script = mock_model
    bench.tools.functions["charge"] = stuck
    rt = await new_runtime(bench, "deadline", agent)
    h = await rt.spawn("root", "payer")
    await rt.wake(h.id, "go")
    waiting = asyncio.create_task(rt.wait(h.id))
    for _ in range(50):
        await asyncio.sleep(0)
    bench.clock.advance(1.0)
    asked = _reconcile(await asyncio.wait_for(waiting, 5))
    assert asked["call_id"] == bench.tools.ledger[0].call_id


async def test_an_inline_answered_rerun_cut_short_is_asked_about_under_its_own_call_id(bench: Bench) -> None:
    """An interpreter answers the tool's question inline; the re-invocation (a new attempt, so a
    new call_id) is recorded in flight before it is sent, so a crash then asks about that one."""
    acting = asyncio.Event()

    async def charge(args: JSON, inv: ToolInvocation) -> ToolResult:
        if inv.answer is None:
            return ToolResult(output="", pending=Request(id="", kind="approval", prompt="charge?"))
        acting.set()
        await asyncio.Event().wait()
        return ToolResult(output="unreachable")

    agent = AgentDef(name="payer", wait_for=True, tools=(ToolDef(name="charge", on_crash=OnCrash.ASK),))
    bench.model.script = mock_model
    bench.tools.functions["charge"] = charge
    rt = await new_runtime(bench, "inline", agent)
    h = await rt.spawn("root", "payer")
    await rt.wake(h.id, "go")
    await asyncio.wait_for(acting.wait(), 5)
    first, again = (inv.call_id for inv in bench.tools.ledger)
    assert again == first + "a1"

    engine = await _restart(bench, bench.engine)
    try:
        asked = _reconcile(await engine.runtime("inline").wait(h.id, 5000))
        assert asked["call_id"] == again
        assert len(bench.tools.ledger) == 2
    finally:
        await engine.stop()
