"""The dispatcher: each daemon call becomes a task on the event loop, deduplicated by call_id.

The one implementation for both clients. Owns the three call kinds of
docs/protocol.md §6 (ToolCall → ToolOutcome, LlmCall → LlmReply, Resolve →
ResolveReply) and the deduplication by ``call_id``: the daemon redelivers a
call (same id) when the stream that held it broke, so the dispatcher keeps a
bounded map of call_id → task and answers a redelivery from it, without
running the tool twice, even while the first run is still in flight. User
code never crashes the worker: an exception becomes an error reply. A
coroutine function runs on the loop; a plain one runs in ``asyncio.to_thread``
(the loop's default executor: a blocking client's pool of ``max_workers``
threads) so it cannot block the loop.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from .. import _convert as convert
from .._defs import Tool
from .._dispatch import reply_parts, to_tool_result
from .._gen import runtime_pb2 as pb
from .._types import JSON, Answer, Request

log = logging.getLogger("toolnexus_client")

AsyncTransport = Callable[[JSON], "Awaitable[Mapping[str, Any]] | Mapping[str, Any]"]
"""A model transport: ``await transport({"body": request})`` → ``{"status", "headers", "body"}``."""

AsyncResolver = Callable[[Request], "Awaitable[Answer | Mapping[str, Any]] | Answer | Mapping[str, Any]"]
"""Answers a ``wait_for`` suspension inline: ``await wait_for(request)`` → Answer (or its dict)."""


async def call_user(fn: Callable[..., Any], *args: Any) -> Any:
    """Await a coroutine function on the loop; run a plain one in a thread; await what it returns."""
    if inspect.iscoroutinefunction(fn):
        return await fn(*args)
    value = await asyncio.to_thread(fn, *args)
    return await value if inspect.isawaitable(value) else value


async def run_tool(runtime_id: str, tools: Mapping[str, Tool], call: pb.ToolCall) -> pb.ToolOutcome:
    """Run one native tool call; never raises (but lets a cancellation through)."""
    tool = tools.get(call.tool)
    if tool is None or tool.execute is None:
        return pb.ToolOutcome(call_id=call.call_id, is_error=True,
                              output=f"tool {call.tool} is not served by this worker")
    try:
        args, ctx = convert.context_from_call(runtime_id, call)
        result = to_tool_result(await call_user(tool.execute, args, ctx))
        return convert.outcome_to_pb(call.call_id, result)
    except Exception as exc:
        log.warning("tool %s raised %s", call.tool, type(exc).__name__)
        return pb.ToolOutcome(call_id=call.call_id, is_error=True,
                              output=f"tool {call.tool} raised {type(exc).__name__}: {exc}")


async def run_llm(transport: AsyncTransport | None, call: pb.LlmCall) -> pb.LlmReply:
    """Relay one model call to the transport; a failure becomes ``LlmReply.error``."""
    out = pb.LlmReply()
    await llm_reply_into(out, transport, call)
    return out


async def llm_reply_into(out: pb.LlmReply, transport: AsyncTransport | None, call: pb.LlmCall) -> None:
    """``run_llm`` written into ``out``, an empty LlmReply: the one a WorkerMessage holds, as a
    reply given to a message's constructor is copied (the body is the largest thing a worker sends)."""
    out.SetInParent()  # a reply even when every field of it is empty
    if transport is None:
        out.call_id, out.error = call.call_id, "this worker has no model transport"
        return
    try:
        request: JSON = {"body": convert.dict_from(call.body)}
        if call.traceparent:  # the call's chat span, when the daemon traces
            request["traceparent"] = call.traceparent
        status, body = reply_parts(await call_user(transport, request))
        convert.struct_into(out.body, body)  # first: its error wins, as when it was built first
        out.body.SetInParent()  # an empty body is still sent as one, as a Struct passed in was
        out.call_id, out.status = call.call_id, status
    except Exception as exc:
        log.warning("model transport raised %s", type(exc).__name__)
        out.Clear()  # nothing of a half-built body stays
        out.call_id, out.error = call.call_id, f"transport raised {type(exc).__name__}: {exc}"


async def run_resolve(resolver: AsyncResolver | None, call: pb.Resolve) -> pb.ResolveReply:
    """Ask the resolver for an Answer; no resolver or a failing one declines (reason ``cancelled``)."""
    request = convert.request_from_pb(call.request)
    try:
        if resolver is None:
            raise LookupError("this worker has no resolver")
        answer = Answer.of(await call_user(resolver, request))
    except Exception as exc:
        log.warning("resolver failed for request %s: %s", request.id, type(exc).__name__)
        answer = Answer(id=request.id, ok=False, reason="cancelled")
    return pb.ResolveReply(call_id=call.call_id, answer=convert.answer_to_pb(answer))


Send = Callable[[pb.WorkerMessage], Awaitable[None]]
"""A connection's writer: sends one reply on it (nothing once it is gone); raises nothing but the
cancellation of the task that calls it."""

_sending: set[asyncio.Task[None]] = set()  # sends scheduled from callbacks, held until written


def _send_when_done(done: asyncio.Task[pb.WorkerMessage], send: Send) -> None:
    """Send a finished call's reply (a redelivered call's first run) on the connection it came on."""
    if done.cancelled():
        return
    error = done.exception()
    if error is not None:
        log.error("worker call failed unexpectedly: %r", error)
        return
    sending = asyncio.ensure_future(send(done.result()))
    _sending.add(sending)
    sending.add_done_callback(_sending.discard)


def _retrieve_when_done() -> None:
    """Mark the current task's exception as seen once it ends (it was logged already): asyncio
    would otherwise report it again when the task is collected."""
    task = asyncio.current_task()
    if task is not None:
        task.add_done_callback(lambda done: done.cancelled() or done.exception())


class Dispatcher:
    """Runs daemon calls as event-loop tasks and deduplicates them by call_id."""

    def __init__(self, runtime_id: str, tools: Mapping[str, Tool], transport: AsyncTransport | None = None,
                 resolver: AsyncResolver | None = None, cache_size: int = 1024) -> None:
        self.runtime_id = runtime_id
        self.tools = dict(tools)
        self.transport = transport
        self.resolver = resolver
        self._cache: OrderedDict[str, asyncio.Task[pb.WorkerMessage]] = OrderedDict()
        self._cache_size = cache_size

    async def handle(self, message: pb.DaemonMessage) -> pb.WorkerMessage:
        return await self._answer(message, message.WhichOneof("msg"))

    async def _answer(self, message: pb.DaemonMessage, kind: str | None) -> pb.WorkerMessage:
        """The reply to one call; built in place in the WorkerMessage (a sub-message passed to a
        constructor is copied, and a model reply's body is the largest thing the worker sends)."""
        out = pb.WorkerMessage()
        if kind == "tool_call":
            out.tool_outcome.CopyFrom(await run_tool(self.runtime_id, self.tools, message.tool_call))
        elif kind == "llm_call":
            await llm_reply_into(out.llm_reply, self.transport, message.llm_call)
        else:
            out.resolve_reply.CopyFrom(await run_resolve(self.resolver, message.resolve))
        return out

    async def _answer_and_send(self, message: pb.DaemonMessage, kind: str | None,
                               send: Send) -> pb.WorkerMessage:
        try:
            reply = await self._answer(message, kind)
        except Exception as error:
            log.error("worker call failed unexpectedly: %r", error)
            _retrieve_when_done()
            raise
        await send(reply)
        return reply

    def submit(self, message: pb.DaemonMessage, kind: str | None = None,
               send: Send | None = None) -> asyncio.Task[pb.WorkerMessage] | None:
        """The task answering a call; a redelivered call_id gets the first run's task. ``kind``: the
        message's ``msg`` field when the caller has read it already. With ``send`` (a connection's
        writer) the reply is also sent: by the task itself, once its reply is ready, or, for a
        redelivered call, when the first run's task is done."""
        if kind is None:
            kind = message.WhichOneof("msg")
        if kind == "llm_call":
            call_id = message.llm_call.call_id
        elif kind == "tool_call":
            call_id = message.tool_call.call_id
        elif kind == "resolve":
            call_id = message.resolve.call_id
        else:
            return None
        cache = self._cache
        known = cache.get(call_id)
        if known is not None:
            cache.move_to_end(call_id)
            if send is not None:
                known.add_done_callback(functools.partial(_send_when_done, send=send))
            return known
        answer = self._answer(message, kind) if send is None else self._answer_and_send(message, kind, send)
        task = asyncio.create_task(answer, name=f"toolnexus-call-{call_id}")
        cache[call_id] = task
        if len(cache) > self._cache_size:
            self._forget_finished()
        return task

    def _forget_finished(self) -> None:
        """Trim the cache to its size from the oldest end, never past a call that is still running."""
        while len(self._cache) > self._cache_size:
            oldest_id, oldest = next(iter(self._cache.items()))
            if not oldest.done():
                break  # never forget a call that is still running
            del self._cache[oldest_id]

    def close(self) -> None:
        """Cancel the calls still running (the daemon redelivers them to another worker)."""
        for task in self._cache.values():
            task.cancel()
