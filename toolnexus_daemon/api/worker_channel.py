"""The ``Connect`` stream: the wire adapter between one app worker and the relay (docs/protocol.md §6).

The first message must be ``hello``; it names a runtime (which must exist and
accept the caller's runtime key) and what the worker serves. The session is
then attached to the hub, a ``Welcome`` goes out, and two things run until
either side ends: this generator drains the session's outbox onto the wire,
and a reader task hands each reply to the hub. Detaching in ``finally``
re-queues whatever the worker had not answered, with the same ``call_id``.
Routing lives in ``relay``; this module only turns the relay's typed messages
into protobuf and back (``daemon_message``, ``worker_reply``).

A reply the daemon refuses (``decode.Refused``) is handled so nothing hangs:
one too deep for ``--max-struct-depth`` still names its call, which gets an
error naming the limit (the turn goes on, as after any failed call); bytes
that do not decode at all end the stream with INVALID_ARGUMENT, because a
worker that sends them cannot be trusted with the calls it holds.

A reply for a call the stream does not hold (an unknown id, one already answered
or timed out, one re-sent to another worker) is ignored; such replies are logged
at most once per ``NOISE_INTERVAL_S`` per stream, with how many there were, so a
worker flooding them cannot flood the log.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import AsyncGenerator, AsyncIterator
from typing import cast

from grpc import aio

from ..engine.verbs.engine import Engine
from ..errors import InvalidArgument
from ..model import ToolResult
from ..relay import (
    CallKind,
    Incoming,
    ModelCallOut,
    ModelReplyIn,
    Outgoing,
    ResolutionIn,
    ToolCallOut,
    ToolOutcomeIn,
    WorkerHub,
    WorkerSession,
    refused,
)
from ..tools.base import action_of
from ._gen import runtime_pb2 as pb
from .convert import answer_from, answer_to, fill_struct, optional_struct, request_from, request_to
from .decode import Refused
from .keys import open_runtime

log = logging.getLogger("toolnexus_daemon.api")

# at most one log line per stream per this many seconds about replies that were ignored
NOISE_INTERVAL_S = 10.0


class _Ignored:
    """Counts one stream's ignored messages of one kind; logs the first, then one line with the
    count per ``NOISE_INTERVAL_S`` (and the rest when the stream ends)."""

    def __init__(self, session: WorkerSession, message: str, level: int = logging.INFO) -> None:
        self._session, self._message, self._level = session, message, level
        self._count = 0
        self._next_at = 0.0
        self._last: dict[str, object] = {}

    def hit(self, call_id: str = "", error: str = "") -> None:
        """One more ignored message; ``call_id`` and ``error`` (the last ones) go in the line."""
        self._count += 1
        self._last = {k: v for k, v in (("call_id", call_id), ("error", error)) if v}
        now = time.monotonic()
        if now >= self._next_at:
            self.flush()
            self._next_at = now + NOISE_INTERVAL_S

    def flush(self) -> None:
        if not self._count:
            return
        log.log(self._level, self._message, extra={"runtime": self._session.runtime_id,
                                                   "worker_id": self._session.worker_id,
                                                   "count": self._count, **self._last})
        self._count = 0


async def serve_worker(engine: Engine, hub: WorkerHub, requests: AsyncIterator[pb.WorkerMessage],
                       context: aio.ServicerContext[pb.WorkerMessage, pb.DaemonMessage],
                       ) -> AsyncGenerator[pb.DaemonMessage, None]:
    """The body of ``Connect``: yields DaemonMessages until the worker or the daemon goes away."""
    session = await _handshake(engine, requests, context)
    hub.attach(session)
    reader = asyncio.create_task(_read_replies(hub, session, requests), name=f"worker {session.worker_id}")
    log.info("worker connected", extra={"runtime": session.runtime_id, "worker_id": session.worker_id})
    try:
        yield pb.DaemonMessage(welcome=pb.Welcome(worker_id=session.worker_id, runtime_id=session.runtime_id))
        while (out := await session.outbox.get()) is not None:
            yield daemon_message(out)
    finally:
        reader.cancel()
        hub.detach(session)
        log.info("worker disconnected", extra={"runtime": session.runtime_id, "worker_id": session.worker_id})
    fatal = reader.result() if reader.done() and not reader.cancelled() else None
    if fatal:
        raise InvalidArgument(fatal)


async def _handshake(engine: Engine, requests: AsyncIterator[pb.WorkerMessage],
                     context: aio.ServicerContext[pb.WorkerMessage, pb.DaemonMessage]) -> WorkerSession:
    first = await anext(requests, None)
    if isinstance(first, Refused):
        raise InvalidArgument(first.reason)
    if first is None or first.WhichOneof("msg") != "hello":
        raise InvalidArgument("first message must be hello")
    hello = first.hello
    rt = await open_runtime(engine, hello.runtime_id, context)
    worker_id = hello.worker_id or "worker-" + secrets.token_hex(4)
    return WorkerSession(runtime_id=rt.id, worker_id=worker_id, tools=frozenset(hello.tools),
                         llm=hello.llm, resolver=hello.resolver, no_tools=hello.no_tools,
                         versions=frozenset(int(v) for v in hello.versions))


async def _read_replies(hub: WorkerHub, session: WorkerSession, requests: AsyncIterator[pb.WorkerMessage],
                        ) -> str | None:
    """Deliver each reply to the hub; when the worker stops sending, end the session.

    Returns why the stream must end INVALID_ARGUMENT, or None when it simply ended.
    """
    ignored = _Ignored(session, "ignored replies for calls this worker does not hold (unknown, "
                                "already answered or timed out, or re-sent to another worker)")
    hellos = _Ignored(session, "ignoring a second hello on a worker stream", logging.WARNING)
    refusals = _Ignored(session, "ignored refused worker messages that answer no call this worker holds",
                        logging.WARNING)
    try:
        async for msg in requests:
            if isinstance(msg, Refused):
                if msg.message is None:
                    return f"worker stream ended: {msg.reason}"
                # Connect's deserializer only ever decodes WorkerMessages
                if not _deliver_refusal(hub, session, cast(pb.WorkerMessage, msg.message), msg.reason):
                    refusals.hit(error=msg.reason)
                continue
            kind = msg.WhichOneof("msg")
            if kind == "hello":
                hellos.hit()
                continue
            if kind is None:
                continue
            try:
                reply = worker_reply(msg)
            except InvalidArgument as exc:
                if not _deliver_refusal(hub, session, msg, str(exc)):
                    refusals.hit(error=str(exc))
                continue
            if not hub.deliver(session, reply):
                ignored.hit(reply.call_id)
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # a broken stream ends the session; its calls are re-sent
        log.info("worker stream ended", extra={"worker_id": session.worker_id, "error": type(exc).__name__})
    finally:
        for noise in (ignored, hellos, refusals):
            noise.flush()
        hub.detach(session)
    return None


def _deliver_refusal(hub: WorkerHub, session: WorkerSession, msg: pb.WorkerMessage, reason: str) -> bool:
    """A reply the daemon cannot take (too deep, NaN, malformed): its call fails with ``reason``
    instead of waiting for an answer that will never come. False when the message answers no
    call this worker holds (then nothing fails)."""
    kind = msg.WhichOneof("msg")
    call_kind = _REPLY_KINDS.get(kind or "")
    if kind is None or call_kind is None:
        return False
    call_id = getattr(msg, kind).call_id
    if not hub.deliver(session, refused(call_kind, call_id, reason, answer_id=msg.resolve_reply.answer.id)):
        return False
    log.warning("worker reply refused; its call fails", extra={"runtime": session.runtime_id,
                                                                "call_id": call_id, "error": reason})
    return True


# which call a reply oneof answers
_REPLY_KINDS = {"tool_outcome": CallKind.TOOL, "llm_reply": CallKind.LLM, "resolve_reply": CallKind.RESOLVE}


def daemon_message(out: Outgoing) -> pb.DaemonMessage:
    """A relay call as the wire message the worker receives.

    Built in place (``fill_struct`` into the message's own Struct field): passing sub-messages
    to constructors copies each one, the model request body twice, on every call.
    """
    msg = pb.DaemonMessage()
    if isinstance(out, ToolCallOut):
        call = msg.tool_call
        call.call_id, call.handle, call.tool = out.call_id, out.handle, out.tool
        call.action_id, call.traceparent = action_of(out.call_id), out.traceparent
        fill_struct(call.arguments, out.arguments)
        call.arguments.SetInParent()  # an empty arguments Struct is still sent, as before
        if out.answer is not None:
            call.answer.CopyFrom(answer_to(out.answer))
        return msg
    if isinstance(out, ModelCallOut):
        llm = msg.llm_call
        llm.call_id, llm.handle, llm.traceparent = out.call_id, out.handle, out.traceparent
        fill_struct(llm.body, out.body)
        llm.body.SetInParent()
        return msg
    msg.resolve.CopyFrom(pb.Resolve(call_id=out.call_id, handle=out.handle, request=request_to(out.request)))
    return msg


def worker_reply(msg: pb.WorkerMessage) -> Incoming:
    """A worker's reply as the relay's typed message; InvalidArgument for a message that is no reply."""
    kind = msg.WhichOneof("msg")
    if kind == "tool_outcome":
        o = msg.tool_outcome
        pending = request_from(o.pending) if o.HasField("pending") else None
        result = ToolResult(output=o.output, is_error=o.is_error,
                            metadata=optional_struct(o, "metadata") or None, pending=pending)
        return ToolOutcomeIn(o.call_id, result)
    if kind == "llm_reply":
        r = msg.llm_reply
        return ModelReplyIn(r.call_id, status=r.status or 200, body=optional_struct(r, "body") or {},
                            error=r.error)
    if kind == "resolve_reply":
        rr = msg.resolve_reply
        return ResolutionIn(rr.call_id, answer_from(rr.answer, require_id=False))
    raise InvalidArgument(f"unexpected worker message {kind!r}")
