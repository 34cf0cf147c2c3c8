"""The worker hub routes calls to capable workers and re-sends what a lost worker held
(docs/protocol.md §6)."""

from __future__ import annotations

import asyncio

import pytest

from toolnexus_daemon.model import ToolResult
from toolnexus_daemon.relay import (
    NoReply,
    NoWorker,
    ToolCallOut,
    ToolOutcomeIn,
    WorkerHub,
    WorkerLost,
    WorkerSession,
)

TOOL = ToolCallOut("rt/h/s1c0", "root/a.1", "lookup", {})


async def test_a_worker_that_serves_no_tools_never_gets_a_tool_call() -> None:
    hub = WorkerHub()
    hub.attach(WorkerSession("rt", "model-only", llm=True, no_tools=True))
    with pytest.raises(NoWorker):
        await hub.call("rt", TOOL, take_timeout=0.05)


async def test_a_call_held_by_a_lost_worker_is_resent_with_the_same_call_id() -> None:
    hub = WorkerHub()
    first = WorkerSession("rt", "w1")
    hub.attach(first)
    call = asyncio.ensure_future(hub.call("rt", TOOL, take_timeout=2))
    sent = await first.outbox.get()
    assert sent is not None and sent.call_id == TOOL.call_id
    hub.detach(first)
    second = WorkerSession("rt", "w2", tools=frozenset({"lookup"}))
    hub.attach(second)
    again = await second.outbox.get()
    assert again is not None and again.call_id == TOOL.call_id
    ok = ToolOutcomeIn(TOOL.call_id, ToolResult(output="ok"))
    assert hub.deliver(second, ok)
    assert await call == ok
    late = ToolOutcomeIn(TOOL.call_id, ToolResult(output="late"))
    assert not hub.deliver(second, late), "a reply nobody waits for is refused"


async def test_a_call_not_to_be_resent_fails_with_worker_lost_and_reaches_no_other_worker() -> None:
    """``resend=False`` (an ``on_crash: "ask"`` tool): the lost worker may have acted, so the call
    is not handed to the other connected worker; the caller hears ``WorkerLost``."""
    hub = WorkerHub()
    first, other = WorkerSession("rt", "w1"), WorkerSession("rt", "w2")
    hub.attach(first)
    call = asyncio.ensure_future(hub.call("rt", TOOL, take_timeout=2, resend=False))
    sent = await first.outbox.get()
    assert sent is not None and sent.call_id == TOOL.call_id
    hub.attach(other)
    hub.detach(first)
    with pytest.raises(WorkerLost):
        await call
    assert other.outbox.empty() and not other.inflight


async def test_only_the_worker_holding_a_call_may_answer_it() -> None:
    hub = WorkerHub()
    a, b = WorkerSession("rt", "a"), WorkerSession("rt", "b")
    hub.attach(a)
    call = asyncio.ensure_future(hub.call("rt", TOOL, take_timeout=2))
    assert await a.outbox.get() == TOOL
    hub.attach(b)
    forged = ToolOutcomeIn(TOOL.call_id, ToolResult(output="forged"))
    assert not hub.deliver(b, forged), "another stream of the runtime answered a call it does not hold"
    assert not hub.deliver(WorkerSession("other", "a"), forged)
    genuine = ToolOutcomeIn(TOOL.call_id, ToolResult(output="genuine"))
    assert hub.deliver(a, genuine)
    assert await call == genuine


async def test_a_silent_holder_loses_the_call_to_another_worker_with_the_same_id() -> None:
    """``reply_timeout``: ``NoReply`` names the silent holder; sent again avoiding it, the call
    (same id) goes to the other worker, and a late reply from the silent one is refused."""
    hub = WorkerHub()
    quiet, talker = WorkerSession("rt", "quiet"), WorkerSession("rt", "talker")
    hub.attach(quiet)
    with pytest.raises(NoReply) as lost:
        await hub.call("rt", TOOL, take_timeout=1, reply_timeout=0.05)
    assert lost.value.session is quiet and not quiet.inflight
    hub.attach(talker)
    again = asyncio.ensure_future(hub.call("rt", TOOL, take_timeout=1, reply_timeout=1,
                                           avoid=frozenset({quiet})))
    assert await talker.outbox.get() == TOOL
    assert not hub.deliver(quiet, ToolOutcomeIn(TOOL.call_id, ToolResult(output="late")))
    ok = ToolOutcomeIn(TOOL.call_id, ToolResult(output="ok"))
    assert hub.deliver(talker, ok)
    assert await again == ok
    # with nobody else connected, an avoided worker still gets the call
    assert await quiet.outbox.get() == TOOL  # (the first delivery)
    hub.detach(talker)
    alone = asyncio.ensure_future(hub.call("rt", TOOL, take_timeout=1, avoid=frozenset({quiet})))
    assert await asyncio.wait_for(quiet.outbox.get(), 1) == TOOL
    alone.cancel()
    with pytest.raises(asyncio.CancelledError):
        await alone
