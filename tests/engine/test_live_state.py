"""A handle's live state has one owner (``engine/state/live.py``): its waiters and its escalation
lock live on the handle and end with what needs them; its turn task is kept once, by the residency.

An escalation lock used to be kept per handle id on the runtime forever: a runtime that escalated
many handles held a lock for every handle it ever escalated."""

from __future__ import annotations

import asyncio
import gc

from toolnexus_daemon.model import JSON, AgentDef, Request, Status, ToolDef, ToolResult
from toolnexus_daemon.tools.base import ToolInvocation
from toolnexus_devtools.model_server import chat_response, tool_call

from .conftest import Bench, new_runtime

HANDLES = 40


def _asks(args: JSON, inv: ToolInvocation) -> ToolResult:
    if inv.answer is None:
        return ToolResult(output="", pending=Request(id=f"ok-{inv.handle}", kind="approval", prompt="ship?"))
    return ToolResult(output="shipped")


def _calls_once(body: JSON) -> JSON:
    if any(m.get("role") == "tool" for m in body.get("messages") or []):
        return chat_response(content="finished")
    return chat_response(tool_calls=[tool_call("act", {})])


def _locks() -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if isinstance(o, asyncio.Lock))


async def test_escalation_locks_end_with_their_escalations(bench: Bench) -> None:
    bench.model.script = _calls_once
    bench.tools.functions["act"] = _asks
    rt = await new_runtime(bench, "r", AgentDef(name="shipper", tools=(ToolDef(name="act"),)), wait_for=True)

    async def escalate_once() -> str:
        h = (await rt.spawn("root", "shipper")).id
        await rt.wake(h, "go")
        result = await rt.wait(h, 5000)
        assert (result.status, result.text) == (Status.DONE, "finished")
        return h

    await escalate_once()  # whatever the first escalation creates once per runtime
    before = _locks()
    handles = [await escalate_once() for _ in range(HANDLES)]
    assert len(bench.resolver.asked) == HANDLES + 1, "every handle escalated inline"
    assert _locks() - before < HANDLES // 4, "a lock is kept per handle ever escalated"
    assert all(rt.snapshot(h).live.escalation_lock is None for h in handles)


async def test_a_turn_task_is_kept_while_it_runs_and_only_then(bench: Bench) -> None:
    bench.model.script = _calls_once
    bench.tools.functions["act"] = lambda args, inv: ToolResult(output="shipped")
    rt = await new_runtime(bench, "r", AgentDef(name="shipper", tools=(ToolDef(name="act"),)))
    h = (await rt.spawn("root", "shipper")).id
    await rt.wake(h, "go")
    assert rt.turn_of(rt.snapshot(h)) is not None, "the residency holds the running turn"
    assert (await rt.wait(h, 5000)).status is Status.DONE
    for _ in range(10):
        await asyncio.sleep(0)
    assert rt.turn_of(rt.snapshot(h)) is None, "a finished turn is not kept"
