"""One step of a turn: the tool calls the model asked for (docs/protocol.md §4 The loop, Suspension, Resume).

Every call of the step runs concurrently; each result is committed to the
step checkpoint as it arrives, so a crash re-runs only the calls that had no
result (with the same ``call_id``) — except calls of ``on_crash: "ask"`` tools,
which are asked about instead (``uncertain``). A call re-invoked after an answer gets a
new ``call_id`` — workers may cache outcomes by it. The first suspending call
in call order suspends the handle durably, unless an interpreter answers inline.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from ...bounds import check_tool_result
from ...model import JSON, Answer, EventType, OnCrash, Request, ToolResult, ToolSource
from ...tools.base import OutcomeUnknown, ToolInvocation
from ..state import notes
from ..state.change import Change
from ..state.checkpoint import Call, Checkpoint, Step, request_id_for
from ..state.handle import Handle
from . import spans, task_tool, tracing, uncertain
from .escalate import try_inline
from .suspend import TASK_TOOL, suspend_durably

if TYPE_CHECKING:
    from .context import Announcing, Stepping

log = logging.getLogger("toolnexus_daemon.engine")

# durable suspensions in a row one call may make (a manager approves, then a director, ...)
MAX_CHAINED = 8

async def run_step(rt: Stepping, h: Handle, cp: Checkpoint, step: Step) -> Change:
    """Run every call of the step that has no kept result, concurrently, each result committed.

    A lone call's result is not committed here but returned in a Change that the caller
    commits together with what follows it (the step's closing or the suspension): one
    synced commit instead of two, with no outside effect in between.
    """
    answered = answered_calls(step) if cp.answer is not None else set()
    # a call whose recorded result suspends runs again only when an answer is applied;
    # after a crash it is not re-invoked (its request is already recorded): the step suspends on it.
    # A reconcile question stays open until it is the one answered.
    todo = [i for i in step.open_calls()
            if i not in step.results or i in answered or (answered and not step.reconciling(i))]
    deferred = Change()
    if not todo:
        return deferred
    again = step.reruns() if answered else []
    # an answered reconcile that its answer does not settle sends the call again, as it was
    resent = {i for i in answered if step.reconciling(i)}
    decided = uncertain.plan(rt, h, cp, step, todo, answered)  # (may open new reconciles)
    before = Change()
    # new attempts get new call_ids, and "ask" calls are marked in flight: both durable before dispatch
    announced = bool(again) and not cp.reinvoke_announced
    if announced:
        announce(rt, h, step, again, before)
    if uncertain.record_dispatch(rt, h, step, [i for i in todo if i not in decided]) or announced:
        await rt.commit(before.checkpoint(h, cp))
    into = deferred if len(todo) == 1 else None
    await _all([_run_call(rt, h, cp, step, i, i in answered - resent, into, decided.get(i)) for i in todo])
    if answered:
        cp.answer = None  # persisted by the commit that follows
        cp.reinvoke_announced = False
    return deferred


async def _all(calls: list[Coroutine[Any, Any, None]]) -> None:
    """Run ``calls`` concurrently; when one fails, the others are stopped before the failure goes
    on: a call left running would commit into a checkpoint the turn no longer owns (a store that
    was away has the turn continued from the stored one)."""
    tasks = [asyncio.ensure_future(c) for c in calls]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


def answered_calls(step: Step) -> set[int]:
    """The calls an answer applies to: the one the handle suspended on and every other call of
    the step that suspended on the same request id — they asked the same question."""
    idx = step.pending_idx
    asked = step.results.get(idx) if idx is not None else None
    if idx is None or asked is None or asked.pending is None:
        return set()
    return {i for i, r in step.results.items() if r.pending is not None and r.pending.id == asked.pending.id}


def announce_reinvocations(rt: Announcing, h: Handle, cp: Checkpoint, change: Change) -> None:
    """Give the calls an accepted answer will run again their new call_ids in ``change`` — the
    acceptance's own commit — so their dispatch needs no commit of its own, and a crash before
    their results re-dispatches them with those same call_ids."""
    step = cp.step
    again = step.reruns() if step is not None else []
    if step is not None and again:
        announce(rt, h, step, again, change)
        cp.reinvoke_announced = True


def announce(rt: Announcing, h: Handle, step: Step, indices: list[int], change: Change) -> Change:
    """Give each call its call_id (a new attempt for one that ran before) and a ``tool_call`` event."""
    base = f"{rt.id}/{h.id}"
    for a in [h, *rt.table.ancestors(h)]:
        a.tool_calls += len(indices)
    change.save(h, *rt.table.ancestors(h))
    for i in indices:
        if i in step.results:  # it ran before and suspended
            step.attempts[i] = step.attempts.get(i, 0) + 1
        call = step.calls[i]
        call.call_id = step.call_id(base, i)
        data: JSON = {"tool": call.name, "call_id": call.call_id}
        if call.raw_arguments:
            data["raw_arguments"] = call.raw_arguments
        change.event(h, EventType.TOOL_CALL, notes.tool_call(h.id, call.name, call.call_id), data=data)
    return change


async def _run_call(rt: Stepping, h: Handle, cp: Checkpoint, step: Step, i: int, answered: bool,
                    into: Change | None, decided: ToolResult | None) -> None:
    call = step.calls[i]
    prior = step.results.get(i)
    started = rt.deps.clock.monotonic()
    result = decided if decided is not None else await _dispatch(rt, h, cp, step, i, answered)
    again, before = result.pending, prior.pending if prior is not None else None
    # (a reconcile question is the daemon's own, never a repeat of what the tool asked)
    if (answered and again is not None and before is not None and not uncertain.asks_about(step, i, again)
            and not is_task_call(rt, h, call)):
        result = _resolve_repeat(again, before, cp.answer.ok if cp.answer else False,
                                 step.chained.get(i, 1))
        if result.pending is not None:
            step.chained[i] = step.chained.get(i, 1) + 1
    step.results[i] = result
    step.inflight.discard(i)
    outcome = "pending" if result.pending else ("error" if result.is_error else "ok")
    latency_ms = int((rt.deps.clock.monotonic() - started) * 1000)
    change = into if into is not None else Change()
    change.event(h, EventType.TOOL_RESULT, notes.tool_result(h.id, call.name, outcome),
                 data={"tool": call.name, "call_id": call.call_id, "outcome": outcome,
                       "source": _source(rt, h, call), "latency_ms": latency_ms})
    if into is None:
        await rt.commit(change.checkpoint(h, cp))


async def _dispatch(rt: Stepping, h: Handle, cp: Checkpoint, step: Step, i: int,
                    answered: bool) -> ToolResult:
    """Run call ``i`` (with the answer, when one applies to it); an interpreter may answer a
    suspension inline. An outcome that cannot be known becomes a ``reconcile`` question."""
    call = step.calls[i]
    applies = answered and cp.answer is not None and (cp.answer.ok or _takes_declines(rt, h, call))
    answer = cp.answer if applies else None
    default_id = request_id_for(f"{rt.id}/{h.id}/s{step.number}c{i}")
    try:
        result = await _invoke(rt, h, call, answer, default_id)
        if result.pending is not None:
            step.inflight.discard(i)  # it came back asking: it did nothing yet (escalation commits)
        if result.pending is not None and not answered and not is_task_call(rt, h, call):

            async def reinvoke(ans: Answer) -> ToolResult:
                # a new attempt gets a new call_id: workers answer a repeated call_id from their cache
                step.attempts[i] = step.attempts.get(i, 0) + 1
                call.call_id = step.call_id(f"{rt.id}/{h.id}", i)
                if uncertain.record_dispatch(rt, h, step, [i]):
                    await rt.commit(Change().checkpoint(h, cp))
                return await _invoke(rt, h, call, ans, default_id)

            inline = await try_inline(rt, h, call.call_id, result.pending, reinvoke)
            result = inline if inline is not None else result
    except OutcomeUnknown as unknown:
        log.warning("outcome of an ask tool's call is unknown; asking",
                    extra={"runtime": rt.id, "handle": h.id, "call_id": call.call_id, "error": str(unknown)})
        return uncertain.reconcile_request(step, i)
    return result


def _takes_declines(rt: Stepping, h: Handle, call: Call) -> bool:
    """An MCP tool is re-invoked with a decline too: the server's elicitation is answered
    ``decline`` (or ``cancel``) and the tool's own result goes to the model (docs/mcp.md)."""
    tool = next((t for t in rt.agent_of(h).tools if t.name == call.name), None)
    return tool is not None and tool.source is ToolSource.MCP


def _resolve_repeat(again: Request, before: Request, ok: bool, in_a_row: int) -> ToolResult:
    """A re-invoked call that suspends again (docs/protocol.md §4 Resume): the same request id is resolved
    (``unresolved`` after an ok, ``declined/expired`` after a decline); a different one is a new
    durable suspension of the same call (chained approvals), up to ``MAX_CHAINED`` in a row."""
    if again.id == before.id:
        return ToolResult(output=f"unresolved: {again.prompt}" if ok else f"declined/expired: {again.prompt}")
    if ok and in_a_row >= MAX_CHAINED:
        return ToolResult(output=f"unresolved: {again.prompt}")
    return ToolResult(output="", pending=again)


def _source(rt: Stepping, h: Handle, call: Call) -> str:
    """Where the call ran (``task`` for delegation), for tool-call metrics."""
    if is_task_call(rt, h, call):
        return "task"
    tool = next((t for t in rt.agent_of(h).tools if t.name == call.name), None)
    return str(tool.source) if tool is not None else "unknown"


def is_task_call(rt: Stepping, h: Handle, call: Call) -> bool:
    """The built-in ``task`` tool exists only for agents with a team (docs/protocol.md §2)."""
    return call.name == TASK_TOOL and bool(rt.agent_of(h).team)


async def _invoke(rt: Stepping, h: Handle, call: Call, answer: Answer | None,
                  default_req_id: str) -> ToolResult:
    """One call under its ``execute_tool`` span; a ``task`` call's child is woken under it."""
    span = spans.start_tool(rt, h, call)
    token = tracing.caller.set(span.traceparent) if span.traceparent else None
    try:
        result = await _invoke_call(rt, h, call, answer, default_req_id, span.traceparent)
    except BaseException as exc:
        spans.end_tool(rt, span, None, str(exc) or type(exc).__name__)
        raise
    finally:
        if token is not None:
            tracing.caller.reset(token)
    spans.end_tool(rt, span, result)
    return result


async def _invoke_call(rt: Stepping, h: Handle, call: Call, answer: Answer | None,
                       default_req_id: str, traceparent: str) -> ToolResult:
    if call.invalid:
        return ToolResult(output=f"invalid JSON arguments for {call.name}: {call.invalid}", is_error=True)
    if is_task_call(rt, h, call):
        return await task_tool.run_task(rt, h, call)
    tool = next((t for t in rt.agent_of(h).tools if t.name == call.name), None)
    if tool is None:
        known = ", ".join(t.name for t in rt.agent_of(h).tools) or "none"
        return ToolResult(output=f'unknown tool "{call.name}" (tools: {known})', is_error=True)
    executor = rt.deps.executors.get(tool.source)
    if executor is None:
        return ToolResult(output=f'tool "{tool.name}": source {tool.source} is not supported', is_error=True)
    version = rt.registry_of(h).number
    inv = ToolInvocation(runtime_id=rt.id, handle=h.id, call_id=call.call_id, tool=tool,
                         arguments=call.arguments, answer=answer, take_timeout_ms=rt.options.tool_timeout_ms,
                         traceparent=traceparent, version=version, latest=version == rt.version)
    deadline_ms = tool.deadline_ms or rt.deps.limits.tool_deadline_ms
    rt.deps.guard.act(rt.id)  # in a cluster: only while this daemon's lease is fresh
    try:
        result = await rt.deps.clock.wait_for(executor.invoke(inv), deadline_ms / 1000)
    except TimeoutError:
        if tool.on_crash is OnCrash.ASK:  # it may have acted: ask rather than guess
            raise OutcomeUnknown(f"no result within its deadline of {deadline_ms} ms") from None
        return ToolResult(output=f'tool "{tool.name}" did not finish within its deadline of {deadline_ms} ms',
                          is_error=True)
    except OutcomeUnknown:
        raise
    except Exception as exc:  # an executor bug must not kill the turn
        log.exception("tool executor failed",
                      extra={"runtime": rt.id, "handle": h.id, "call_id": call.call_id})
        return ToolResult(output=f'tool "{tool.name}" failed: {exc}', is_error=True)
    result = check_tool_result(result, tool.name, rt.deps.limits)
    if result.pending is not None and not result.pending.id:
        pending = Request(default_req_id, result.pending.kind, result.pending.prompt, result.pending.url,
                          result.pending.data, result.pending.expires_at)
        result = ToolResult(result.output, result.is_error, result.metadata, pending)
    return result


async def maybe_suspend(rt: Stepping, h: Handle, step: Step, change: Change) -> bool:
    """The first suspending call in call order suspends the handle durably (``change`` goes along)."""
    idx = step.first_pending()
    if idx is None:
        return False
    await suspend_durably(rt, h, step, idx, change)
    return True


def close_step(h: Handle, cp: Checkpoint, step: Step, change: Change) -> Change:
    """Every call has a result: append the tool messages (in call order) and go on. Returns the
    change to commit; the turn loop commits it beside its next model call (``turn.Landing``)."""
    for i, call in enumerate(step.calls):
        msg = {"role": "tool", "tool_call_id": call.tool_call_id, "content": step.results[i].output}
        change.message(h, h.log_len, msg)
        h.log_len += 1
    cp.step = None
    return change.save(h).checkpoint(h, cp)
