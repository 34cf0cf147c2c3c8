"""The turn loop of one handle: model call, tool calls, checkpoint, repeat (docs/protocol.md §4).

The loop is driven by the handle's checkpoint, which is why a resumed or
recovered turn simply runs it again: with no open step it asks the model;
with an open step it runs the calls that have no result yet (applying an
accepted Answer to the suspended one) and goes on. Every model reply and
every tool result is committed before the next action that leaves the
daemon; the model is asked while the commit before it syncs (``landing``).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from ...bounds import PeerDataError, check_reply, parse_arguments
from ...errors import StoreError, StoreUnavailable
from ...llm.base import ModelError, ModelReply, ModelRequest
from ...model import JSON, EventType, HandleState, Status, TaskResult, Usage
from ..commit.landing import Landing, WakeRefused, landed
from ..state import notes
from ..state.change import Change
from ..state.checkpoint import Call, Checkpoint, Step, call_base
from ..state.handle import Handle
from . import budget as budgets
from . import spans, tracing
from .slot import TurnSlot
from .step import announce, close_step, maybe_suspend, run_step
from .task_tool import tool_payload as task_tool_payload

if TYPE_CHECKING:
    from .context import Turn

log = logging.getLogger("toolnexus_daemon.engine")

# body keys the loop owns; request_params never override them
RESERVED_PARAMS = frozenset({"messages", "tools", "stream", "model"})
# the rough size of a token, for estimating usage a server did not report
BYTES_PER_TOKEN = 4
# how much of an invalid arguments text (and of why) a call keeps
MAX_INVALID_NOTE = 2048


async def run_turn(rt: Turn, h: Handle, landing: Landing | None = None) -> bool:
    """Run ``h``'s open turn until it settles or suspends; failures settle it as ``error``.
    Returns whether the turn ended here (settled, suspended, interrupted or closed — not stopped
    with its task): its parent's slot is then free, which the residency acts on. A store that
    cannot be reached raises ``StoreUnavailable``: the turn can be neither recorded nor failed
    now, and the residency continues it from its checkpoint once the store is back."""
    tracing.caller.set("")  # this task's own context: a child it wakes is not the waker's caller's
    span = spans.start_turn(rt, h)
    tracing.current_turn.set(span)
    try:
        await _loop(rt, h, landing)
    finally:
        spans.end_turn(h, span, _cancelled())
    return h.state is not HandleState.RUNNING and not _cancelled()


def _cancelled() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


async def _loop(rt: Turn, h: Handle, landing: Landing | None) -> None:
    """``landing``: the commit of the wake that started this turn, when it is still on its way."""
    turn = h.cp  # this task runs this turn only: a later wake's turn belongs to its own task
    known: list[JSON] = []  # the transcript this turn sent the model, durable (``_transcript``)
    try:
        while h.state is HandleState.RUNNING and h.cp is turn and turn is not None:
            cp = turn
            if cp.step is None:
                stop = _limit_reached(rt, h, cp)
                if stop is not None:
                    await landed(landing)
                    await _settle_incomplete(rt, h, cp, *stop)
                    return
                started = rt.deps.clock.monotonic()
                reply, landing = await _ask_model(rt, h, cp, landing, known), None
                await _record_reply(rt, h, cp, reply, int((rt.deps.clock.monotonic() - started) * 1000))
            else:
                await landed(landing)  # tool calls leave the daemon: what precedes them is durable first
                landing = None
                deferred = await run_step(rt, h, cp, cp.step)
                if await maybe_suspend(rt, h, cp.step, deferred):
                    return
                landing = _land(rt, h, close_step(h, cp, cp.step, deferred))
        await landed(landing)  # the turn moved on without asking the model (interrupted or closed)
    except asyncio.CancelledError:
        raise
    except WakeRefused:
        return  # the Wake's caller heard why; memory is the store's again
    except StoreUnavailable:
        raise  # nothing can be recorded now, the end of the turn neither (``run_turn``)
    except ModelError as exc:
        log.warning("model call failed", extra={"runtime": rt.id, "handle": h.id, "error": str(exc)})
        await _settle_error(rt, h, str(exc))
    except StoreError as exc:
        log.error("commit failed; the turn ends error", extra={"runtime": rt.id, "handle": h.id,
                                                                "error": str(exc)})
        await _settle_failed_commit(rt, h, f"store error: {exc}")
    except Exception as exc:  # a bug: settle loudly instead of leaving the handle running forever
        log.exception("turn crashed", extra={"runtime": rt.id, "handle": h.id})
        await _settle_error(rt, h, f"internal error: {type(exc).__name__}: {exc}")


def _limit_reached(rt: Turn, h: Handle, cp: Checkpoint) -> tuple[str, str, str] | None:
    """Why the turn must stop before asking the model again (text, limit, note), or None."""
    max_turns = h.budget.max_turns or rt.options.max_turns
    if cp.turns >= max_turns:
        return "hit maxTurns without a final answer", "maxTurns", notes.incomplete(h.id, max_turns)
    spent = budgets.exhausted_limit(rt, h)
    if spent is None:
        return None
    text = f"budget exhausted ({spent[0]}); partial work preserved"
    return text, spent[1], f"{h.id}: running→idle (INCOMPLETE: {text})"


def _land(rt: Turn, h: Handle, change: Change) -> Landing:
    """Queue the step's closing commit without waiting for it (``landing``)."""
    written = sorted((index, msg) for hid, index, msg in change.messages if hid == h.id)
    first = written[0][0] if written else h.log_len
    return Landing(rt.start_commit(change), first, [msg for _, msg in written])


# ---------------------------------------------------------------- model


def _tools_payload(rt: Turn, h: Handle) -> list[JSON]:
    agent = rt.agent_of(h)
    tools = [{"type": "function", "function": {
        "name": t.name, "description": t.description,
        "parameters": t.input_schema or {"type": "object", "properties": {}}}}
        for t in agent.tools]
    return tools + [task_tool_payload(agent, rt.registry_of(h).agents)] if agent.team else tools


async def _transcript(rt: Turn, h: Handle, end: int, known: list[JSON]) -> list[JSON]:
    """The stored transcript ``[0, end)``, read from the store only where the owner does not
    already hold it: the prefix it committed or read before (``state.held``: a resumed turn
    sends what the suspension and the answer wrote without a read), else what this turn already
    sent (``known``, durable) and the rest from the store (the owner wrote all of it under its
    lease, and a turn ends before anything rewrites what it sent: truncation and reloads end the
    turn). What the store returned is offered back to the held prefix."""
    held = rt.table.held
    whole = held.transcript(h.id, end)
    if whole is not None:
        return whole
    rid, hid, start = rt.id, h.id, len(known)
    if start > end:  # never expected within a turn: trust the store
        known.clear()
        start = 0
    if start == end:
        return list(known)
    mark = held.mark()
    sent = known + await rt.deps.store.read(lambda s: s.messages(rid, hid, start, end))
    held.offer(hid, mark, sent)
    return sent


async def _request_body(rt: Turn, h: Handle, landing: Landing | None,
                        known: list[JSON]) -> tuple[JSON, list[JSON]]:
    """The model request's body, and the transcript it sends (what ``known`` becomes once the
    landing is durable)."""
    agent = rt.agent_of(h)
    messages: list[JSON] = [{"role": "system", "content": agent.soul}] if agent.soul else []
    if landing is not None:  # the transcript up to the landing commit, then what it writes
        sent = await _transcript(rt, h, landing.first, known) + landing.messages
    else:
        sent = await _transcript(rt, h, h.log_len, known)
    messages += sent
    llm = rt.llm_of(h)  # the handle's own registry version, whatever was deployed since
    body: JSON = {"model": llm.model if agent.model in ("", "inherit") else agent.model}
    # request_params go first so they can never override what the loop itself owns
    body.update({k: v for k, v in {**llm.request_params, **agent.request_params}.items()
                 if k not in RESERVED_PARAMS})
    body["messages"] = messages
    tools = _tools_payload(rt, h)
    if tools:
        body["tools"] = tools
    else:
        body.pop("tool_choice", None)  # docs/protocol.md §4: omitted when there are no tools
    return body, sent


async def _ask_model(rt: Turn, h: Handle, cp: Checkpoint, landing: Landing | None,
                     known: list[JSON]) -> ModelReply:
    """The model's checked reply, returned only once ``landing`` (if any) is durable: a refused
    landing raises its ``StoreError`` (over any model error), and the reply is dropped.
    ``known``: the transcript this turn sent so far, durable; what was sent this time once it is."""
    if landing is not None and landing.first + len(landing.messages) != h.log_len:
        await landed(landing)  # not the commit's own tail (never expected): read it all from the store
        landing = None
    slot = TurnSlot(rt.turn_gate, rt.deps.clock.sleep)
    call_id = f"{call_base(rt.id, h.id, cp.tag)}/m{h.turns_total + 1}"  # the same when re-issued
    body, sent = await _request_body(rt, h, landing, known)
    span = spans.start_model(rt, h, body)
    request = ModelRequest(runtime_id=rt.id, handle=h.id, call_id=call_id,
                           body=body, take_timeout_ms=rt.options.tool_timeout_ms,
                           on_text=(lambda delta: rt.publish_text(h, delta)) if rt.llm_of(h).stream else None,
                           sleep=_acting_after(rt, slot.sleep_outside), traceparent=span.traceparent)
    try:
        async with slot:
            rt.deps.guard.act(rt.id)  # in a cluster: only while this daemon's lease is fresh
            reply = await rt.model_of(h).complete(request)
    except BaseException as exc:
        spans.end_model(rt, span, None, str(exc) or type(exc).__name__)
        if isinstance(exc, ModelError):
            await landed(landing)  # a store refusal is the turn's failure, not the model's
        raise
    reply = with_usage(reply, request.body)
    spans.end_model(rt, span, reply)
    await landed(landing)
    known[:] = sent  # every message sent is durable now
    try:
        check_reply(reply.message, reply.usage, rt.deps.limits)
    except PeerDataError as exc:  # the turn ends error naming the problem; nothing is committed
        raise ModelError(str(exc)) from None
    return reply


Sleep = Callable[[float], Awaitable[None]]


def _acting_after(rt: Turn, sleep: Sleep) -> Sleep:
    """The transport's wait between attempts, after which the next attempt may go out only while this
    daemon still owns the runtime (in a cluster: a pause or a partition may have lasted past the lease)."""
    async def sleep_then_check(seconds: float) -> None:
        await sleep(seconds)
        rt.deps.guard.act(rt.id)
    return sleep_then_check


def with_usage(reply: ModelReply, body: JSON) -> ModelReply:
    """The reply with usage: the server's, or — when it sent none (a stream that ignores
    ``include_usage``, a worker model) — an estimate of about four bytes per token, marked
    estimated, so token budgets still bind and nothing reads a silent 0."""
    if reply.usage.total_tokens > 0:
        return reply
    prompt = max(1, len(json.dumps(body.get("messages") or [], default=str)) // BYTES_PER_TOKEN)
    completion = max(1, len(json.dumps(reply.message, default=str)) // BYTES_PER_TOKEN)
    return replace(reply, usage=Usage(prompt, completion, prompt + completion, estimated=True))


def _parse_calls(rt: Turn, base: str, number: int, message: JSON) -> list[Call]:
    """The calls of a checked reply; arguments that are not a JSON object mark the call invalid
    (it is answered with an error the model can read, never run on arguments it did not send)."""
    calls = []
    for i, tc in enumerate(message.get("tool_calls") or []):
        fn = tc["function"]
        raw = fn.get("arguments")
        try:
            args, invalid, kept = parse_arguments(raw, rt.deps.limits), "", ""
        except PeerDataError as exc:
            args, invalid = {}, str(exc)[:MAX_INVALID_NOTE]
            kept = (raw if isinstance(raw, str) else repr(raw))[:MAX_INVALID_NOTE]
        calls.append(Call(tool_call_id=str(tc.get("id") or f"call_{i}"), name=fn["name"], arguments=args,
                          call_id=f"{base}/s{number}c{i}", raw_arguments=kept, invalid=invalid))
    return calls


def message_text(message: JSON) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def _add_usage(rt: Turn, h: Handle, reply: ModelReply) -> list[Handle]:
    h.own_usage = h.own_usage + reply.usage
    touched = [h, *rt.table.ancestors(h)]
    for a in touched:
        a.usage = a.usage + reply.usage
    return touched


async def _record_reply(rt: Turn, h: Handle, cp: Checkpoint, reply: ModelReply,
                        latency_ms: int) -> None:
    h.turns_total += 1
    cp.turns += 1
    cp.tokens += reply.usage.total_tokens
    touched = _add_usage(rt, h, reply)
    index = h.log_len
    h.log_len += 1
    change = Change().save(*touched).message(h, index, reply.message)
    change.event(h, EventType.MODEL_CALL, notes.model_call(h.id, cp.turns, reply.usage.total_tokens),
                 data={"usage": reply.usage.to_json(), "latency_ms": latency_ms})
    calls = _parse_calls(rt, call_base(rt.id, h.id, cp.tag), h.turns_total, reply.message)
    if not calls:
        result = h.result(Status.DONE, message_text(reply.message))
        _settle(h, cp, change, result, notes.done(h.id, cp.turns, cp.tokens))
        await rt.commit(change)
        h.live.settle(result)
        return
    cp.step = Step(number=h.turns_total, assistant_index=index, calls=calls, tag=cp.tag)
    # the calls are announced (tool_call events) in the same commit as the reply that asked for them
    await rt.commit(announce(rt, h, cp.step, list(range(len(calls))), change).checkpoint(h, cp))


def _settle(h: Handle, cp: Checkpoint, change: Change, result: TaskResult, note: str) -> None:
    """The turn completed: its messages join the transcript and the checkpoint goes."""
    h.committed_len = h.log_len
    h.state = HandleState.IDLE
    h.cp = None
    h.last_result = result
    change.save(h).checkpoint(h, None)
    change.transition(h, HandleState.RUNNING, HandleState.IDLE, note)
    change.event(h, EventType.RESULT, note, result=result)


async def _settle_incomplete(rt: Turn, h: Handle, cp: Checkpoint, text: str, limit: str,
                             note: str) -> None:
    result = h.result(Status.INCOMPLETE, text, limit=limit)
    change = Change()
    _settle(h, cp, change, result, note)
    await rt.commit(change)
    h.live.settle(result)


async def _settle_failed_commit(rt: Turn, h: Handle, message: str) -> None:
    """A commit of the turn was refused (a full map or disk): the turn ends ``error`` so waiters
    hear why and the handle can be woken again. The settling commit is small and usually fits;
    if it is refused too, memory is settled anyway and the store keeps the turn's checkpoint,
    which the next start continues."""
    try:
        await _settle_error(rt, h, message)
    except StoreUnavailable:
        raise  # recorded neither: the turn is continued from its checkpoint (``run_turn``)
    except StoreError as again:
        log.error("the failed turn could not be recorded either",
                  extra={"runtime": rt.id, "handle": h.id, "error": str(again)})
        if h.last_result is not None:
            h.live.settle(h.last_result)


async def _settle_error(rt: Turn, h: Handle, message: str) -> None:
    """A failed turn: nothing of it joins the transcript; drained inbox items go back."""
    cp = h.cp
    change = Change()
    if cp is not None:
        h.inbox[0:0] = cp.drained
        change.truncate.append((h.id, cp.turn_start))
        h.log_len = h.committed_len = cp.turn_start
    result = h.result(Status.ERROR, message)
    h.state = HandleState.IDLE
    h.cp = None
    h.last_result = result
    change.save(h).checkpoint(h, None)
    change.transition(h, HandleState.RUNNING, HandleState.IDLE, notes.errored(h.id, message))
    change.event(h, EventType.RESULT, notes.errored(h.id, message), result=result)
    await rt.commit(change)
    h.live.settle(result)
