"""The MCP edge's verbs for a runtime another daemon of the cluster owns, sent there over gRPC.

``mcp_edge.verbs.Verbs`` calls the engine; when the engine answers ``Moved`` it calls this, which
sends the same verb to the owner as a call of this daemon (``Forwarder.send``: the bearer token the
daemons of a cluster share, ``x-toolnexus-forwarded-by`` so it never circles) and turns the owner's
reply back into the daemon's model. An MCP client holds no runtime key, so a key-protected
runtime cannot be served through another daemon: the owner refuses with PERMISSION_DENIED.

The registry is not an RPC's answer, so the agents of a runtime come from the shared store.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import grpc
from google.protobuf.message import Message
from grpc import aio

from ..engine.commit.ownership import Moved
from ..errors import DaemonError, FailedPrecondition, InvalidArgument, NotFound, Unavailable
from ..mcp_edge.verbs import View
from ..model import Answer, HandleState, Request, Status, TaskResult
from ..store.base import Store
from . import convert
from ._gen import runtime_pb2 as pb
from .forward import Forwarder

# a unary verb's deadline; Wait is asked again every WAIT_SLICE_MS until the turn settles
CALL_S = 15.0
WAIT_SLICE_MS = 50_000


class RemoteVerbs:
    def __init__(self, forwarder: Forwarder, store: Store, auth_token: str) -> None:
        self._forwarder = forwarder
        self._store = store
        self._metadata = [("authorization", f"Bearer {auth_token}")] if auth_token else []

    async def _send(self, method: str, request: Message, moved: Moved, timeout: float = CALL_S) -> Any:
        try:
            return await self._forwarder.send(method, request, moved, self._metadata, timeout)
        except aio.AioRpcError as err:
            raise _error(err) from err

    async def agents(self, moved: Moved, runtime_id: str) -> list[tuple[str, str]]:
        record = await asyncio.to_thread(self._store.get_runtime, runtime_id)
        if record is None:
            raise NotFound(f'runtime "{runtime_id}" not found')
        return [(str(a.get("name", "")), str(a.get("does", ""))) for a in record.get("agents", [])]

    async def spawn_awake(self, moved: Moved, runtime_id: str, agent: str, prompt: str) -> str:
        reply = await self._send("Spawn", pb.SpawnRequest(runtime_id=runtime_id, agent=agent, prompt=prompt),
                                 moved)
        return str(reply.handle)

    async def wait(self, moved: Moved, runtime_id: str, handle: str) -> TaskResult:
        while True:
            request = pb.WaitRequest(runtime_id=runtime_id, handle=handle, timeout_ms=WAIT_SLICE_MS)
            result = result_from(await self._send("Wait", request, moved, WAIT_SLICE_MS / 1000 + CALL_S))
            if result.status is not Status.TIMEOUT:
                return result

    async def resume(self, moved: Moved, runtime_id: str, answer: Answer) -> None:
        request = pb.ResumeRequest(runtime_id=runtime_id, no_wait=True, answer=convert.answer_to(answer))
        await self._send("Resume", request, moved)

    async def view(self, moved: Moved, runtime_id: str, handle: str) -> View:
        reply = await self._send("Snapshot", pb.SnapshotRequest(runtime_id=runtime_id, handle=handle), moved)
        return view_from(reply)

    async def views(self, moved: Moved, runtime_id: str) -> list[View]:
        reply = await self._send("List", pb.ListRequest(runtime_id=runtime_id), moved)
        return [view_from(h) for h in reply.handles]

    async def interrupt(self, moved: Moved, runtime_id: str, handle: str) -> None:
        await self._send("Interrupt", pb.InterruptRequest(runtime_id=runtime_id, handle=handle), moved)

    async def close(self, moved: Moved, runtime_id: str, handle: str) -> None:
        await self._send("Close", pb.CloseRequest(runtime_id=runtime_id, handle=handle), moved)


def result_from(msg: pb.TaskResult) -> TaskResult:
    pending = _request(msg.pending) if msg.HasField("pending") else None
    return TaskResult(status=Status(msg.status), text=msg.text, is_error=msg.is_error, pending=pending,
                      turns=msg.turns, total_tokens=msg.total_tokens, limit=msg.limit or None,
                      usage_estimated=msg.usage_estimated)


def view_from(msg: pb.HandleSnapshot) -> View:
    pending = _request(msg.pending) if msg.HasField("pending") else None
    last = result_from(msg.last_result) if msg.HasField("last_result") else None
    return View(msg.id, HandleState(msg.state), msg.depth, pending, last)


def _request(msg: pb.Request) -> Request:
    return replace(convert.request_from(msg), answer_url=msg.answer_url or None)


def _error(err: aio.AioRpcError) -> DaemonError:
    details = err.details() or ""
    code = err.code()
    if code is grpc.StatusCode.NOT_FOUND:
        return NotFound(details)
    if code is grpc.StatusCode.INVALID_ARGUMENT:
        return InvalidArgument(details)
    if code is grpc.StatusCode.FAILED_PRECONDITION:
        return FailedPrecondition(details)
    return Unavailable(f"the daemon that owns the runtime answered {code.name}: {details}")
