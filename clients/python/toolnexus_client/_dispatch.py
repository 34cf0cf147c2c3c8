"""What a worker does with each call the daemon sends: run it, and build the reply.

Owns the three call kinds of docs/protocol.md §6 (ToolCall → ToolOutcome, LlmCall →
LlmReply, Resolve → ResolveReply), the coercion of whatever user code returns
into those replies, and the deduplication by ``call_id``: the daemon redelivers
a call (same id) when the stream that held it broke, so the dispatcher keeps a
bounded map of call_id → future and answers a redelivery from it, without
running the tool twice, even while the first run is still in flight.
User code never crashes the worker: an exception becomes an error reply.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from . import _convert as convert
from ._defs import Tool
from ._gen import runtime_pb2 as pb
from ._types import JSON, Answer, Request, ToolResult

log = logging.getLogger("toolnexus_client")

Transport = Callable[[JSON], Mapping[str, Any]]
"""A model transport: ``transport({"body": request})`` → ``{"status", "headers", "body"}``."""

Resolver = Callable[[Request], "Answer | Mapping[str, Any]"]
"""Answers a ``wait_for`` suspension inline: ``wait_for(request)`` → Answer (or its dict)."""

RESULT_KEYS = frozenset({"output", "is_error", "metadata", "pending"})


def to_tool_result(value: Any) -> ToolResult:
    """Coerce what a tool returned: str → ok output, ToolResult as is, a dict of ToolResult keys
    (``output``/``is_error``/``metadata``/``pending``) as a ToolResult, None → empty output,
    anything else → its JSON text as output."""
    if isinstance(value, ToolResult):
        return value
    if isinstance(value, str):
        return ToolResult.ok(value)
    if value is None:
        return ToolResult.ok("")
    if isinstance(value, Mapping) and value and set(value) <= RESULT_KEYS:
        pending = value.get("pending")
        return ToolResult(output=str(value.get("output") or ""), is_error=bool(value.get("is_error")),
                          metadata=dict(value["metadata"]) if value.get("metadata") else None,
                          pending=Request.of(pending) if pending else None)
    return ToolResult.ok(json.dumps(value, default=str))


def run_tool(runtime_id: str, tools: Mapping[str, Tool], call: pb.ToolCall) -> pb.ToolOutcome:
    """Run one native tool call; never raises."""
    tool = tools.get(call.tool)
    if tool is None or tool.execute is None:
        return pb.ToolOutcome(call_id=call.call_id, is_error=True,
                              output=f"tool {call.tool} is not served by this worker")
    try:
        args, ctx = convert.context_from_call(runtime_id, call)
        result = to_tool_result(tool.execute(args, ctx))
        return convert.outcome_to_pb(call.call_id, result)
    except Exception as exc:
        log.warning("tool %s raised %s", call.tool, type(exc).__name__)
        return pb.ToolOutcome(call_id=call.call_id, is_error=True,
                              output=f"tool {call.tool} raised {type(exc).__name__}: {exc}")


def run_llm(transport: Transport | None, call: pb.LlmCall) -> pb.LlmReply:
    """Relay one model call to the transport; a failure becomes ``LlmReply.error``."""
    if transport is None:
        return pb.LlmReply(call_id=call.call_id, error="this worker has no model transport")
    try:
        reply = transport({"body": convert.dict_from(call.body)})
        status, body = reply_parts(reply)
        return pb.LlmReply(call_id=call.call_id, status=status, body=convert.struct_from(body))
    except Exception as exc:
        log.warning("model transport raised %s", type(exc).__name__)
        return pb.LlmReply(call_id=call.call_id, error=f"transport raised {type(exc).__name__}: {exc}")


def reply_parts(reply: Mapping[str, Any]) -> tuple[int, JSON]:
    """``(status, body)`` of a transport reply; a bare chat-completion dict counts as a 200 body."""
    if "body" not in reply:
        return 200, dict(reply)
    status = int(reply.get("status") or 200)
    body = reply["body"]
    if isinstance(body, bytes | bytearray):
        body = body.decode("utf-8", "replace")
    if isinstance(body, str):
        try:
            body = json.loads(body) if body.strip() else {}
        except ValueError:
            body = {"error": {"message": body}}
    if not isinstance(body, Mapping):
        raise TypeError(f"model reply body is {type(body).__name__}, not a JSON object")
    return status, dict(body)


def run_resolve(resolver: Resolver | None, call: pb.Resolve) -> pb.ResolveReply:
    """Ask the resolver for an Answer; no resolver or a failing one declines (reason ``cancelled``)."""
    request = convert.request_from_pb(call.request)
    try:
        if resolver is None:
            raise LookupError("this worker has no resolver")
        answer = Answer.of(resolver(request))
    except Exception as exc:
        log.warning("resolver failed for request %s: %s", request.id, type(exc).__name__)
        answer = Answer(id=request.id, ok=False, reason="cancelled")
    return pb.ResolveReply(call_id=call.call_id, answer=convert.answer_to_pb(answer))


class Dispatcher:
    """Runs daemon calls on a small thread pool and deduplicates them by call_id."""

    def __init__(self, runtime_id: str, tools: Mapping[str, Tool], transport: Transport | None = None,
                 resolver: Resolver | None = None, max_workers: int = 8, cache_size: int = 1024) -> None:
        self.runtime_id = runtime_id
        self.tools = dict(tools)
        self.transport = transport
        self.resolver = resolver
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="toolnexus-call")
        self._cache: OrderedDict[str, Future[pb.WorkerMessage]] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()

    def handle(self, message: pb.DaemonMessage) -> pb.WorkerMessage | None:
        """The reply to one call, computed in the calling thread (None for a Welcome or unknown kind)."""
        kind = message.WhichOneof("msg")
        if kind == "tool_call":
            return pb.WorkerMessage(tool_outcome=run_tool(self.runtime_id, self.tools, message.tool_call))
        if kind == "llm_call":
            return pb.WorkerMessage(llm_reply=run_llm(self.transport, message.llm_call))
        if kind == "resolve":
            return pb.WorkerMessage(resolve_reply=run_resolve(self.resolver, message.resolve))
        return None

    def submit(self, message: pb.DaemonMessage) -> Future[pb.WorkerMessage] | None:
        """The future reply to a call; a redelivered call_id gets the first run's future."""
        kind = message.WhichOneof("msg")
        if kind not in ("tool_call", "llm_call", "resolve"):
            return None
        call_id = getattr(message, kind).call_id
        with self._lock:
            known = self._cache.get(call_id)
            if known is not None:
                self._cache.move_to_end(call_id)
                return known
            future: Future[pb.WorkerMessage] = self._pool.submit(self._handle_safely, message)
            self._cache[call_id] = future
            self._evict()
        return future

    def _handle_safely(self, message: pb.DaemonMessage) -> pb.WorkerMessage:
        reply = self.handle(message)
        assert reply is not None  # submit only schedules call kinds
        return reply

    def _evict(self) -> None:
        while len(self._cache) > self._cache_size:
            oldest_id, oldest = next(iter(self._cache.items()))
            if not oldest.done():
                break  # never forget a call that is still running
            del self._cache[oldest_id]

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
