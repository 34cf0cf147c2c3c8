"""Deadlines that fire, on the virtual clock (docs/protocol.md §10): an open suspension whose
``expires_at`` passes is declined by the daemon itself, through the path of a Resume."""

from __future__ import annotations

import asyncio

import pytest

from toolnexus_daemon.clock import rfc3339
from toolnexus_daemon.engine.verbs.engine import Engine
from toolnexus_daemon.engine.verbs.runtime import Runtime
from toolnexus_daemon.errors import FailedPrecondition, InvalidArgument
from toolnexus_daemon.model import (
    AgentDef,
    Answer,
    EventType,
    HandleState,
    Request,
    RuntimeOptions,
    Status,
    ToolDef,
    ToolResult,
    ToolSource,
)
from toolnexus_daemon.tools.base import ToolInvocation
from toolnexus_devtools import mock_model

from .conftest import LLM, Bench, new_runtime

AGENT = AgentDef(name="asker", does="asks first", tools=(ToolDef(name="ask"),))


class Asking:
    """A tool that suspends on ``(id, expires_at)``; an ok answer to ``first`` asks ``second``."""

    def __init__(self, expires_at: str | None, then: tuple[str, str] | None = None) -> None:
        self.asking: tuple[str, str | None] = ("first", expires_at)
        self.then = then

    def __call__(self, args: dict, inv: ToolInvocation) -> ToolResult:  # type: ignore[type-arg]
        if inv.answer is not None and inv.answer.id == "first" and self.then is not None:
            self.asking = self.then
        elif inv.answer is not None:
            return ToolResult(output="approved")
        rid, expires = self.asking
        return ToolResult(output="", pending=Request(id=rid, kind="approval", prompt=f"{rid}?",
                                                     expires_at=expires))


async def _suspend(bench: Bench, tool: Asking, rid: str = "rt", **options: int) -> tuple[Runtime, str]:
    bench.model.script = mock_model
    bench.tools.functions["ask"] = tool
    rt = await new_runtime(bench, rid, AGENT, **options)
    h = await rt.spawn("root", "asker")
    await rt.wake(h.id, "go")
    result = await rt.wait(h.id, 5000)
    assert result.status is Status.PENDING
    return rt, h.id


async def _settled(rt: Runtime, hid: str) -> bool:
    """Let the loop run (time stands still) until ``hid`` is neither suspended nor running."""
    for _ in range(500):
        if rt.snapshot(hid).state not in (HandleState.SUSPENDED, HandleState.RUNNING):
            return True
        await asyncio.sleep(0)
    return False


async def _idle_loop() -> None:
    for _ in range(100):
        await asyncio.sleep(0)


def _resumed(bench: Bench, rid: str) -> list[tuple[str, bool]]:
    return [(e.data["request_id"], e.data["ok"]) for e in bench.store.events(rid, 0, 10_000)
            if e.type is EventType.RESUMED and e.data]


async def test_the_deadline_declines_on_time_not_before(bench: Bench) -> None:
    """A second short of the deadline nothing happens; at it the leaf is declined as expired and
    the model reads ``declined/expired: <prompt>``."""
    rt, hid = await _suspend(bench, Asking(rfc3339(bench.clock.now() + 60)))
    [(when, leaf)] = bench.store.expiring("rt", 10)
    assert when == pytest.approx(bench.clock.now() + 60) and leaf == hid
    bench.clock.advance(59)
    await _idle_loop()
    assert rt.snapshot(hid).state is HandleState.SUSPENDED and _resumed(bench, "rt") == []
    bench.clock.advance(1)
    assert await _settled(rt, hid)
    result = await rt.wait(hid, 1000)
    assert (result.status, result.text) == (Status.DONE, "declined/expired: first?")
    tool_reads = [m["content"] for m in bench.model.bodies[-1]["messages"] if m.get("role") == "tool"]
    assert tool_reads == ["declined/expired: first?"]
    assert _resumed(bench, "rt") == [("first", False)]
    assert bench.store.expiring("rt", 10) == []
    entry = bench.store.get_request("rt", "first")
    assert entry is not None and entry["handles"][hid]["state"] == "expired"
    assert entry["handles"][hid]["answer"]["reason"] == "expired"
    assert bench.engine.deadlines.fired == 1


async def test_pending_ttl_gives_a_deadline_to_a_request_without_one(bench: Bench) -> None:
    start = bench.clock.now()
    rt, hid = await _suspend(bench, Asking(None), pending_ttl_ms=5000)
    pending = rt.snapshot(hid).pending
    assert pending is not None and pending.expires_at == rfc3339(start + 5)
    announced = [e.pending for e in bench.store.events("rt", 0, 1000) if e.type is EventType.PENDING]
    assert announced and announced[0] is not None and announced[0].expires_at == rfc3339(start + 5)
    bench.clock.advance(4.999)
    await _idle_loop()
    assert rt.snapshot(hid).state is HandleState.SUSPENDED
    bench.clock.advance(0.001)
    assert await _settled(rt, hid)
    assert (await rt.wait(hid, 1000)).text == "declined/expired: first?"


async def test_a_request_with_its_own_deadline_keeps_it_under_a_ttl(bench: Bench) -> None:
    own = rfc3339(bench.clock.now() + 600)
    rt, hid = await _suspend(bench, Asking(own), pending_ttl_ms=5000)
    pending = rt.snapshot(hid).pending
    assert pending is not None and pending.expires_at == own
    bench.clock.advance(10)
    await _idle_loop()
    assert rt.snapshot(hid).state is HandleState.SUSPENDED


@pytest.mark.parametrize("second_after", [50, 300])
async def test_a_new_suspension_reschedules(bench: Bench, second_after: int) -> None:
    """Answered in time, the call asks again with a deadline of its own (sooner or later than the
    first): the first deadline does nothing, the second one fires."""
    now = bench.clock.now()
    tool = Asking(rfc3339(now + 100), then=("second", rfc3339(now + second_after)))
    rt, hid = await _suspend(bench, tool)
    bench.clock.advance(10)
    out = await rt.resume(Answer("first", ok=True))
    assert out.result is not None and out.result.status is Status.PENDING
    assert [h for _, h in bench.store.expiring("rt", 10)] == [hid]
    bench.clock.advance(second_after - 10 - 1)
    await _idle_loop()
    assert rt.snapshot(hid).state is HandleState.SUSPENDED, "nothing fires for the answered request"
    assert _resumed(bench, "rt") == [("first", True)]
    bench.clock.advance(1)
    assert await _settled(rt, hid)
    assert (await rt.wait(hid, 1000)).text == "declined/expired: second?"
    assert _resumed(bench, "rt") == [("first", True), ("second", False)]


@pytest.mark.parametrize("verb", ["close", "interrupt"])
async def test_a_closed_or_interrupted_handle_s_deadline_does_nothing(bench: Bench, verb: str) -> None:
    rt, hid = await _suspend(bench, Asking(rfc3339(bench.clock.now() + 60)))
    calls = len(bench.tools.ledger)
    await (rt.close(hid) if verb == "close" else rt.interrupt(hid))
    assert bench.store.expiring("rt", 10) == []
    state = rt.snapshot(hid).state
    bench.clock.advance(120)
    await _idle_loop()
    assert rt.snapshot(hid).state is state and _resumed(bench, "rt") == []
    assert len(bench.tools.ledger) == calls and bench.engine.deadlines.fired == 0


async def test_the_deadline_first_then_a_late_answer_is_refused(bench: Bench) -> None:
    rt, hid = await _suspend(bench, Asking(rfc3339(bench.clock.now() + 60)))
    bench.clock.advance(60)
    assert await _settled(rt, hid)
    with pytest.raises(FailedPrecondition, match="already expired"):
        await rt.resume(Answer("first", ok=True))
    assert _resumed(bench, "rt") == [("first", False)]


async def test_an_answer_and_the_deadline_at_once_resolve_it_once(bench: Bench) -> None:
    """The answer reaches Resume's lock in the tick the deadline passes: exactly one resolves the
    request (the late answer counts as expired), the scheduler's decline changes nothing."""
    rt, hid = await _suspend(bench, Asking(rfc3339(bench.clock.now() + 60)))
    calls = len(bench.tools.ledger)
    bench.clock.advance(60)
    answered = asyncio.ensure_future(rt.resume(Answer("first", ok=True)))
    assert await _settled(rt, hid)
    out = await answered
    assert out.result is not None and out.result.text == "declined/expired: first?" and not out.duplicate
    await _idle_loop()
    assert _resumed(bench, "rt") == [("first", False)]
    assert len(bench.tools.ledger) == calls + 1, "the declined call ran once, fresh"
    assert bench.engine.deadlines.fired == 0


async def test_many_due_at_once_are_all_declined(bench: Bench) -> None:
    bench.model.script = mock_model
    expires = rfc3339(bench.clock.now() + 30)

    def ask(args: dict, inv: ToolInvocation) -> ToolResult:  # type: ignore[type-arg]
        return ToolResult(output="", pending=Request(id=f"q-{inv.handle}", kind="approval", prompt="ok?",
                                                     expires_at=expires))

    bench.tools.functions["ask"] = ask
    rt = await new_runtime(bench, "many", AGENT)
    handles = [(await rt.spawn("root", "asker")).id for _ in range(70)]
    for hid in handles:
        await rt.wake(hid, "go")
        assert (await rt.wait(hid, 5000)).status is Status.PENDING
    bench.clock.advance(31)
    for hid in handles:
        assert await _settled(rt, hid)
    assert len(_resumed(bench, "many")) == 70 and bench.store.expiring("many", 100) == []


async def test_a_daemon_started_after_the_deadline_fires_it_at_start(bench: Bench) -> None:
    """Durable: the deadline is read from the store's expiry index when the runtime is loaded."""
    rt, hid = await _suspend(bench, Asking(rfc3339(bench.clock.now() + 60)))
    await bench.engine.stop()
    bench.clock.advance(3600)
    engine = Engine(bench.store, clock=bench.clock, model_for=lambda llm: bench.model,
                    executors={ToolSource.NATIVE: bench.tools}, resolver=bench.resolver)
    await engine.start()
    try:
        again = engine.runtime("rt")
        assert await _settled(again, hid)
        assert (await again.wait(hid, 1000)).text == "declined/expired: first?"
        assert engine.deadlines.fired == 1
    finally:
        await engine.stop()


@pytest.mark.parametrize("ttl", [-1, 366 * 24 * 3600 * 1000 + 1])
async def test_a_negative_or_absurd_ttl_is_refused(bench: Bench, ttl: int) -> None:
    with pytest.raises(InvalidArgument, match="pending_ttl_ms"):
        await bench.engine.new("bad", [AGENT], LLM, RuntimeOptions(pending_ttl_ms=ttl))


async def test_the_ttl_is_kept_with_the_runtime_record(bench: Bench) -> None:
    await new_runtime(bench, "kept", AGENT, pending_ttl_ms=1234)
    rec = bench.store.get_runtime("kept")
    assert rec is not None and RuntimeOptions.from_json(rec["options"]).pending_ttl_ms == 1234


async def test_an_expiry_declines_on_the_handles_own_version_after_its_agent_left_the_registry(
        bench: Bench) -> None:
    """The handle's agent left the latest registry: the handle is pinned to the version it suspended
    under (docs/versions.md), which still defines it, so its expiry declines as usual."""
    rt, hid = await _suspend(bench, Asking(rfc3339(bench.clock.now() + 60)))
    other = AgentDef(name="other", does="something else")
    await bench.engine.new("rt", [other], LLM, RuntimeOptions())
    assert rt.version == 2 and rt.snapshot(hid).version == 1
    bench.clock.advance(60)
    assert await _settled(rt, hid)
    assert (await rt.wait(hid, 1000)).text == "declined/expired: first?"
