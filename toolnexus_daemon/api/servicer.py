"""The ``AgentRuntime`` servicer: each method converts, calls the engine, converts back.

No agent logic lives here. Errors are translated by the ``status``
decorators; every method naming a runtime checks its runtime key first
(``keys.open_runtime``). Wait and Resume can block for as long as an agent
runs, so on shutdown they end with UNAVAILABLE instead of holding the
daemon's exit hostage: the state they wait on is durable and a client
simply retries them once the daemon is back (a repeated Resume answers
``duplicate``). Watch and Connect streams that the shutdown ends close with
UNAVAILABLE too, saying so, rather than with an OK a client could mistake for
"nothing more will ever happen".
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import Any, TypeAlias, TypeVar

from grpc import aio

from ..engine.engine import Engine
from ..engine.runtime import Runtime
from ..errors import InvalidArgument, NotFound, PermissionDenied, Unavailable
from ..model import ROOT_ID
from ..relay import WorkerHub
from . import convert
from ._gen import runtime_pb2 as pb
from ._gen import runtime_pb2_grpc as pb_grpc
from .convert_registry import registry_from, spawn_budget
from .fit import fit_result, fit_snapshots
from .info import DaemonFacts, info_response
from .keys import open_runtime, presented_key
from .limits import check_prompt
from .status import streaming, unary
from .worker_channel import serve_worker

T = TypeVar("T")
Ctx: TypeAlias = aio.ServicerContext[Any, Any]
# told a resume outcome: "ok", "declined", "duplicate" or "unknown" (metrics)
ResumeObserver = Callable[[str], None]
SHUTTING_DOWN = "the daemon is shutting down; the state is durable, retry once it serves again"


class AgentRuntimeServicer(pb_grpc.AgentRuntimeServicer):  # the generated base (untyped, not checked)
    def __init__(self, engine: Engine, hub: WorkerHub, facts: DaemonFacts | None = None, *,
                 on_resume: ResumeObserver | None = None) -> None:
        self._engine = engine
        self._hub = hub
        self.facts = facts or DaemonFacts()
        self._on_resume = on_resume
        # set by the composition root: what a daemon-wide Shutdown calls (the same stop as SIGTERM)
        self.stop_daemon: Callable[[], None] | None = None
        # the operator's --allow-remote-shutdown: Shutdown{daemon: true} may call stop_daemon
        self.remote_shutdown = False
        self._closing = asyncio.Event()
        self._open = False
        # set while the store's database is unreachable (api.store_state): why RPCs answer UNAVAILABLE
        self.store_down: str | None = None

    def open(self) -> None:
        """Recovery is done: start answering (until then every RPC is UNAVAILABLE)."""
        self._open = True

    def is_open(self) -> bool:
        """Serving: recovery done and not shutting down."""
        return self._open and not self._closing.is_set()

    def _require_open(self) -> None:
        if not self._open:
            raise Unavailable("the daemon is recovering its runtimes; retry shortly (health is NOT_SERVING)")
        if self.store_down:
            raise Unavailable(self.store_down)

    def _runtime(self, runtime_id: str, context: Ctx) -> Runtime:
        self._require_open()
        return open_runtime(self._engine, runtime_id, context)

    def begin_shutdown(self) -> None:
        """Make blocked Wait/Resume calls return UNAVAILABLE now."""
        self._closing.set()

    async def _until_closing(self, work: Awaitable[T]) -> T:
        task = asyncio.ensure_future(work)
        closing = asyncio.ensure_future(self._closing.wait())
        try:
            await asyncio.wait({task, closing}, return_when=asyncio.FIRST_COMPLETED)
            if task.done():
                return task.result()
            raise Unavailable(SHUTTING_DOWN)
        finally:
            closing.cancel()
            if not task.done():
                task.cancel()

    # ------------------------------------------------------------------ runtimes

    @unary
    async def New(self, request: pb.NewRequest, context: Ctx) -> pb.NewResponse:
        self._require_open()
        reg = registry_from(request, self.facts.limits)
        out = await self._engine.new(request.runtime_id, reg.agents, reg.llm, reg.options,
                                     request.runtime_key or presented_key(context))
        return pb.NewResponse(runtime_id=out.runtime_id, root=out.root, reattached=out.reattached)

    @unary
    async def Shutdown(self, request: pb.ShutdownRequest, context: Ctx) -> pb.ShutdownResponse:
        if request.daemon:
            return self._shutdown_daemon(request)
        self._runtime(request.runtime_id, context)
        await self._engine.shutdown_runtime(request.runtime_id, request.purge)
        if request.purge:
            self._hub.detach_runtime(request.runtime_id)
        return pb.ShutdownResponse()

    def _shutdown_daemon(self, request: pb.ShutdownRequest) -> pb.ShutdownResponse:
        if request.runtime_id or request.purge:
            raise InvalidArgument("daemon=true stops the whole daemon: leave runtime_id and purge unset")
        if not self.remote_shutdown:
            raise PermissionDenied(
                "Shutdown{daemon: true} stops the daemon for every tenant, so it is off unless the operator "
                "starts it with --allow-remote-shutdown (env TOOLNEXUS_ALLOW_REMOTE_SHUTDOWN=1); "
                "otherwise stop the daemon with SIGTERM")
        if self.stop_daemon is None:
            raise Unavailable("this server cannot stop its daemon")
        self.stop_daemon()
        return pb.ShutdownResponse()

    @unary
    async def Info(self, request: pb.InfoRequest, context: Ctx) -> pb.InfoResponse:
        self._require_open()
        options = self._runtime(request.runtime_id, context).options if request.runtime_id else None
        return info_response(self._engine, self.facts, options)

    # ------------------------------------------------------------------ handles

    @unary
    async def Spawn(self, request: pb.SpawnRequest, context: Ctx) -> pb.SpawnResponse:
        rt = self._runtime(request.runtime_id, context)
        h = await rt.spawn(request.parent or ROOT_ID, request.agent, spawn_budget(request))
        return pb.SpawnResponse(handle=h.id)

    @unary
    async def Wake(self, request: pb.WakeRequest, context: Ctx) -> pb.WakeResponse:
        check_prompt(self.facts.limits, request.prompt, "prompt")
        rt = self._runtime(request.runtime_id, context)
        return pb.WakeResponse(queued=await rt.wake(request.handle, request.prompt))

    @unary
    async def Wait(self, request: pb.WaitRequest, context: Ctx) -> pb.TaskResult:
        if request.timeout_ms < 0:
            raise InvalidArgument("timeout_ms must not be negative (0 = wait without a limit)")
        rt = self._runtime(request.runtime_id, context)
        result = await self._until_closing(rt.wait(request.handle, request.timeout_ms))
        return fit_result(convert.result_to(result), self.facts.limits.max_message_bytes)

    @unary
    async def Resume(self, request: pb.ResumeRequest, context: Ctx) -> pb.ResumeResponse:
        if not request.HasField("answer"):
            raise InvalidArgument("answer is required")
        answer = convert.answer_from(request.answer)
        rt = self._runtime(request.runtime_id, context)
        try:
            out = await self._until_closing(rt.resume(answer, request.handle, request.no_wait))
        except NotFound:
            self._resumed("unknown")
            raise
        self._resumed("duplicate" if out.duplicate else "ok" if answer.ok else "declined")
        response = pb.ResumeResponse(handle=out.handle, duplicate=out.duplicate)
        if out.result is not None:
            limit = self.facts.limits.max_message_bytes
            response.result.CopyFrom(fit_result(convert.result_to(out.result), limit))
        return response

    def _resumed(self, outcome: str) -> None:
        if self._on_resume is not None:
            self._on_resume(outcome)

    @unary
    async def Snapshot(self, request: pb.SnapshotRequest, context: Ctx) -> pb.HandleSnapshot:
        rt = self._runtime(request.runtime_id, context)
        await rt.durable()  # never show a state a crash could still take back
        return fit_snapshots([convert.snapshot_to(rt.snapshot(request.handle))],
                             self.facts.limits.max_message_bytes)[0]

    @unary
    async def List(self, request: pb.ListRequest, context: Ctx) -> pb.ListResponse:
        rt = self._runtime(request.runtime_id, context)
        await rt.durable()
        snaps = [convert.snapshot_to(h) for h in rt.list()]
        return pb.ListResponse(handles=fit_snapshots(snaps, self.facts.limits.max_message_bytes))

    @unary
    async def Post(self, request: pb.PostRequest, context: Ctx) -> pb.PostResponse:
        check_prompt(self.facts.limits, request.item.text, "item.text")
        rt = self._runtime(request.runtime_id, context)
        position = await rt.post(request.handle, convert.inbox_item_from(request.item))
        return pb.PostResponse(position=position, inbox_cap=rt.options.inbox_cap)

    @unary
    async def Interrupt(self, request: pb.InterruptRequest, context: Ctx) -> pb.InterruptResponse:
        rt = self._runtime(request.runtime_id, context)
        done = await rt.interrupt(request.handle)
        return pb.InterruptResponse(from_state=str(done.from_state), cancelled_request=done.cancelled_request,
                                    inbox_restored=done.inbox_restored)

    @unary
    async def Close(self, request: pb.CloseRequest, context: Ctx) -> pb.CloseResponse:
        rt = self._runtime(request.runtime_id, context)
        await rt.close(request.handle)
        return pb.CloseResponse()

    # ------------------------------------------------------------------ streams

    @streaming
    async def Watch(self, request: pb.WatchRequest, context: Ctx) -> AsyncGenerator[pb.Event, None]:
        types = convert.event_types(list(request.types))
        rt = self._runtime(request.runtime_id, context)
        events = rt.watch(request.after_seq, types, request.handle)
        last = request.after_seq
        try:
            async for event in events:
                last = event.seq or last
                yield convert.event_to(event)
        finally:
            # end the engine's subscription now (a cancelled stream), not when the generator is collected
            await events.aclose()
        if self._closing.is_set():
            raise Unavailable(f"{SHUTTING_DOWN}; Watch again with after_seq={last}")

    @streaming
    async def Connect(self, request_iterator: AsyncIterator[pb.WorkerMessage],
                      context: Ctx) -> AsyncGenerator[pb.DaemonMessage, None]:
        self._require_open()
        worker = serve_worker(self._engine, self._hub, request_iterator, context)
        try:
            async for message in worker:
                yield message
        finally:
            await worker.aclose()
        if self._closing.is_set():
            raise Unavailable(f"{SHUTTING_DOWN}; unanswered calls are re-sent when the worker reconnects")
