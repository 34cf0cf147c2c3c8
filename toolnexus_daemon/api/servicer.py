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
import functools
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import Literal, TypeVar

from google.protobuf.message import Message

from ..engine.commit.ownership import Moved
from ..engine.verbs.engine import Engine
from ..engine.verbs.event_stream import FellBehind
from ..engine.verbs.runtime import Runtime, Woken
from ..errors import InvalidArgument, NotFound, PermissionDenied, Unavailable
from ..model import ROOT_ID, EventType
from ..relay import WorkerHub
from . import convert, pending, trace_meta
from . import versions as versions_api
from ._gen import runtime_pb2 as pb
from ._gen import runtime_pb2_grpc as pb_grpc
from .convert_registry import registry_from, spawn_budget
from .fit import fit_result, fit_snapshots
from .forward import Forwarder
from .info import DaemonFacts, cluster_nodes, info_response
from .keys import open_for_answer, open_runtime, presented_key
from .limits import check_prompt, check_wait_ms
from .pending_watch import CLUSTER_POLL_S, RELIST_HEADER, PendingHub, watch
from .pending_watch import FellBehind as PendingFellBehind
from .status import Ctx, streaming, unary
from .stream_limit import StreamLimit
from .worker_channel import serve_worker

T = TypeVar("T")
Req = TypeVar("Req", bound=Message)
Resp = TypeVar("Resp", bound=Message)
In = TypeVar("In")
Out = TypeVar("Out")
# told a resume outcome: "ok", "declined", "duplicate" or "unknown" (metrics)
ResumeObserver = Callable[[str], None]
SHUTTING_DOWN = "the daemon is shutting down; the state is durable, retry once it serves again"
# trailing metadata of a Watch ended for falling behind: the seq to resume after (the clients read it)
RESUME_AFTER_HEADER = "x-toolnexus-resume-after-seq"


Method = Callable[["AgentRuntimeServicer", Req, Ctx[Req, Resp]], Awaitable[Resp]]


def forwarded(reply: type[Resp]) -> Callable[[Method[Req, Resp]], Method[Req, Resp]]:
    """A unary method whose runtime may live on another daemon of the cluster: ``Moved`` sends
    the call there (``api.forward``) and returns the owner's reply (a ``reply``) as this call's."""

    def decorate(fn: Method[Req, Resp]) -> Method[Req, Resp]:
        @functools.wraps(fn)
        async def wrapper(self: AgentRuntimeServicer, request: Req, context: Ctx[Req, Resp]) -> Resp:
            try:
                return await fn(self, request, context)
            except Moved as moved:
                if self.forwarder is None:
                    raise
                return await self.forwarder.unary(fn.__name__, request, context, moved, reply)

        return wrapper

    return decorate


class AgentRuntimeServicer(pb_grpc.AgentRuntimeServicer):  # the generated base: mypy checks each override
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
        # done at shutdown like ``_closing``: the one future every blocked Wait/Resume races against
        self._closed: asyncio.Future[None] | None = None
        self._open = False
        # set while the store's database is unreachable (api.store_state): why RPCs answer UNAVAILABLE
        self.store_down: str | None = None
        # a member of a cluster: sends calls for runtimes owned elsewhere to their owner
        self.forwarder: Forwarder | None = None
        # WatchPending's source; in a cluster it also polls the shared index for other daemons' changes
        poll_s = CLUSTER_POLL_S if engine.ownership is not None else None
        self.pending = PendingHub(engine.inbox, poll_s=poll_s)
        # open Watch and WatchPending streams per caller (--max-watch-streams-per-caller)
        self.streams = StreamLimit(self.facts.limits.max_watch_streams_per_caller)

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

    async def _runtime(self, runtime_id: str, context: Ctx[In, Out]) -> Runtime:
        """The runtime a call names; in a cluster ``Moved`` when another daemon owns it, which the
        ``forwarded`` methods send on to that daemon."""
        self._require_open()
        return await open_runtime(self._engine, runtime_id, context)

    def begin_shutdown(self) -> None:
        """Make blocked Wait/Resume calls (and WatchPending streams) return UNAVAILABLE now."""
        self._closing.set()
        if self._closed is not None and not self._closed.done():
            self._closed.set_result(None)
        self.pending.close(f"{SHUTTING_DOWN}; WatchPending again (it starts over with the full list)")

    async def _until_closing(self, work: Awaitable[T], rt: Runtime) -> T:
        """``work``, unless the daemon shuts down or (cluster) gives ``rt`` up first: then
        UNAVAILABLE, and the caller's retry reaches whoever serves the runtime then.

        Shutdown is one shared future rather than a task per call waiting on ``_closing``; only
        a cluster member can give a runtime up (``Engine.lost``), so only there does a call
        also wait on ``rt.gone``. Two of the cycle's four RPCs come here.
        """
        task = asyncio.ensure_future(work)
        closing = self._closed_future()
        either: list[asyncio.Future[T] | asyncio.Future[None] | asyncio.Future[Literal[True]]]
        either = [task, closing]
        gone = asyncio.ensure_future(rt.gone.wait()) if self._engine.ownership is not None else None
        if gone is not None:
            either.append(gone)
        try:
            await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
            if task.done():
                return task.result()
            raise Unavailable(SHUTTING_DOWN if closing.done() else f"{rt.retired}; retry the call")
        finally:
            if gone is not None:
                gone.cancel()
            if not task.done():
                task.cancel()

    def _closed_future(self) -> asyncio.Future[None]:
        loop = asyncio.get_running_loop()
        if self._closed is None or self._closed.get_loop() is not loop:
            self._closed = loop.create_future()
            if self._closing.is_set():
                self._closed.set_result(None)
        return self._closed

    # ------------------------------------------------------------------ runtimes

    @unary
    @forwarded(pb.NewResponse)
    async def New(self, request: pb.NewRequest,
                  context: Ctx[pb.NewRequest, pb.NewResponse]) -> pb.NewResponse:
        self._require_open()
        trace_meta.adopt(context)
        reg = registry_from(request, self.facts.limits)
        out = await self._engine.new(request.runtime_id, reg.agents, reg.llm, reg.options,
                                     request.runtime_key or presented_key(context))
        return pb.NewResponse(runtime_id=out.runtime_id, root=out.root, reattached=out.reattached,
                              version=versions_api.version_to(out.version))

    @unary
    @forwarded(pb.ShutdownResponse)
    async def Shutdown(self, request: pb.ShutdownRequest,
                       context: Ctx[pb.ShutdownRequest, pb.ShutdownResponse]) -> pb.ShutdownResponse:
        if request.daemon:
            return self._shutdown_daemon(request)
        await self._runtime(request.runtime_id, context)
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
    @forwarded(pb.InfoResponse)
    async def Info(self, request: pb.InfoRequest,
                   context: Ctx[pb.InfoRequest, pb.InfoResponse]) -> pb.InfoResponse:
        self._require_open()
        rt = await self._runtime(request.runtime_id, context) if request.runtime_id else None
        live = self.facts.live_nodes
        nodes = cluster_nodes(await asyncio.to_thread(live)) if live is not None else None
        store = await self._engine.store.read(lambda s: s.info())
        out = info_response(self._engine, self.facts, rt.options if rt is not None else None, nodes, store)
        if rt is not None:  # which versions' native calls wait here for a worker (docs/versions.md)
            out.runtime_version = rt.version
            out.versions_without_worker.extend(self._hub.versions_waiting(rt.id))
        return out

    # ------------------------------------------------------------------ handles

    @unary
    @forwarded(pb.SpawnResponse)
    async def Spawn(self, request: pb.SpawnRequest,
                    context: Ctx[pb.SpawnRequest, pb.SpawnResponse]) -> pb.SpawnResponse:
        check_wait_ms(request.wait_ms)
        if request.wait_ms and not request.prompt:
            raise InvalidArgument("wait_ms waits for the turn a prompt starts: set prompt too "
                                  "(or Spawn, then Wake with wait_ms)")
        check_prompt(self.facts.limits, request.prompt, "prompt")
        trace_meta.adopt(context)
        rt = await self._runtime(request.runtime_id, context)
        parent, budget = request.parent or ROOT_ID, spawn_budget(request)
        if not request.prompt:
            return pb.SpawnResponse(handle=(await rt.spawn(parent, request.agent, budget)).id)
        woken = await rt.spawn_awake(parent, request.agent, budget, request.prompt, request.wait_ms)
        response = pb.SpawnResponse(handle=woken.handle, queued=woken.queued)
        await self._settled_into(response.result, woken, rt)
        return response

    @unary
    @forwarded(pb.WakeResponse)
    async def Wake(self, request: pb.WakeRequest,
                   context: Ctx[pb.WakeRequest, pb.WakeResponse]) -> pb.WakeResponse:
        check_wait_ms(request.wait_ms)
        check_prompt(self.facts.limits, request.prompt, "prompt")
        trace_meta.adopt(context)
        rt = await self._runtime(request.runtime_id, context)
        woken = await rt.wake_for(request.handle, request.prompt, request.wait_ms, request.upgrade)
        response = pb.WakeResponse(queued=woken.queued)
        await self._settled_into(response.result, woken, rt)
        return response

    async def _settled_into(self, out: pb.TaskResult, woken: Woken, rt: Runtime) -> None:
        """Fill ``out`` with the woken turn's result when a wait was asked for. A shutdown (or the
        runtime moving) that cuts the wait short leaves it unset rather than failing the call:
        the wake is already durable, and an error would invite a retry that wakes twice."""
        if woken.wait is None:
            return
        try:
            result = await self._until_closing(woken.wait.result(), rt)
        except Unavailable:
            return
        finally:
            woken.wait.drop()  # a wait cancelled before it ran never reached its own finally
        out.CopyFrom(fit_result(convert.result_to(result), self.facts.limits.max_message_bytes))

    @unary
    @forwarded(pb.TaskResult)
    async def Wait(self, request: pb.WaitRequest,
                   context: Ctx[pb.WaitRequest, pb.TaskResult]) -> pb.TaskResult:
        if request.timeout_ms < 0:
            raise InvalidArgument("timeout_ms must not be negative (0 = wait without a limit)")
        rt = await self._runtime(request.runtime_id, context)
        result = await self._until_closing(rt.wait(request.handle, request.timeout_ms), rt)
        return fit_result(convert.result_to(result), self.facts.limits.max_message_bytes)

    @unary
    @forwarded(pb.ResumeResponse)
    async def Resume(self, request: pb.ResumeRequest,
                     context: Ctx[pb.ResumeRequest, pb.ResumeResponse]) -> pb.ResumeResponse:
        if not request.HasField("answer"):
            raise InvalidArgument("answer is required")
        answer = convert.answer_from(request.answer)
        self._require_open()
        trace_meta.adopt(context)
        rt = await open_for_answer(self._engine, request.runtime_id, answer.id, request.handle, context)
        try:
            out = await self._until_closing(rt.resume(answer, request.handle, request.no_wait,
                                                      request.accept_changed_definition, request.upgrade), rt)
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
    @forwarded(pb.HandleSnapshot)
    async def Snapshot(self, request: pb.SnapshotRequest,
                       context: Ctx[pb.SnapshotRequest, pb.HandleSnapshot]) -> pb.HandleSnapshot:
        rt = await self._runtime(request.runtime_id, context)
        await rt.durable()  # never show a state a crash could still take back
        await rt.fetch(request.handle)  # parked on disk: read off the event loop
        h = rt.snapshot(request.handle)
        return fit_snapshots([convert.snapshot_to(h, rt.definition_changed(h))],
                             self.facts.limits.max_message_bytes)[0]

    @unary
    @forwarded(pb.ListResponse)
    async def List(self, request: pb.ListRequest,
                   context: Ctx[pb.ListRequest, pb.ListResponse]) -> pb.ListResponse:
        rt = await self._runtime(request.runtime_id, context)
        await rt.durable()
        snaps = [convert.snapshot_to(h, rt.definition_changed(h)) for h in await rt.fetch_all()]
        return pb.ListResponse(handles=fit_snapshots(snaps, self.facts.limits.max_message_bytes))

    @unary
    @forwarded(pb.PostResponse)
    async def Post(self, request: pb.PostRequest,
                   context: Ctx[pb.PostRequest, pb.PostResponse]) -> pb.PostResponse:
        check_prompt(self.facts.limits, request.item.text, "item.text")
        rt = await self._runtime(request.runtime_id, context)
        position = await rt.post(request.handle, convert.inbox_item_from(request.item))
        return pb.PostResponse(position=position, inbox_cap=rt.options.inbox_cap)

    @unary
    @forwarded(pb.InterruptResponse)
    async def Interrupt(self, request: pb.InterruptRequest,
                        context: Ctx[pb.InterruptRequest, pb.InterruptResponse]) -> pb.InterruptResponse:
        rt = await self._runtime(request.runtime_id, context)
        done = await rt.interrupt(request.handle)
        return pb.InterruptResponse(from_state=str(done.from_state), cancelled_request=done.cancelled_request,
                                    inbox_restored=done.inbox_restored)

    @unary
    @forwarded(pb.CloseResponse)
    async def Close(self, request: pb.CloseRequest,
                    context: Ctx[pb.CloseRequest, pb.CloseResponse]) -> pb.CloseResponse:
        rt = await self._runtime(request.runtime_id, context)
        await rt.close(request.handle)
        return pb.CloseResponse()

    # ------------------------------------------------------------------ the pending inbox

    @unary
    async def ListPending(self, request: pb.ListPendingRequest,
                          context: Ctx[pb.ListPendingRequest, pb.ListPendingResponse],
                          ) -> pb.ListPendingResponse:
        self._require_open()  # read from the (shared) store: any daemon of a cluster answers for all
        query = pending.pending_query(request, self._engine.clock.now())
        return await pending.list_pending(self._engine.inbox, query, presented_key(context))

    @unary
    async def ListRuntimes(self, request: pb.ListRuntimesRequest,
                           context: Ctx[pb.ListRuntimesRequest, pb.ListRuntimesResponse],
                           ) -> pb.ListRuntimesResponse:
        self._require_open()
        out = await pending.list_runtimes(self._engine.inbox, request, presented_key(context))
        for summary in out.runtimes:  # native calls waiting here for a worker of their version
            summary.versions_without_worker.extend(self._hub.versions_waiting(summary.runtime_id))
        return out

    @unary
    @forwarded(pb.ListVersionsResponse)
    async def ListVersions(self, request: pb.ListVersionsRequest,
                           context: Ctx[pb.ListVersionsRequest, pb.ListVersionsResponse],
                           ) -> pb.ListVersionsResponse:
        rt = await self._runtime(request.runtime_id, context)
        await rt.durable()  # count what is on disk
        return await asyncio.to_thread(versions_api.list_versions, rt)

    @streaming
    async def WatchPending(self, request: pb.WatchPendingRequest,
                           context: Ctx[pb.WatchPendingRequest, pb.PendingChange],
                           ) -> AsyncGenerator[pb.PendingChange, None]:
        self._require_open()
        with self.streams.hold(context, "WatchPending"):
            changes = watch(self.pending, self._engine.inbox, request, presented_key(context))
            try:
                async for change in changes:
                    yield change
            except PendingFellBehind:
                context.set_trailing_metadata(((RELIST_HEADER, "1"),))
                raise
            finally:
                await changes.aclose()

    # ------------------------------------------------------------------ streams

    # each event goes out encoded already (``_watch``; ``decode._serialize`` passes bytes through), which
    # the generated signature, yielding only ``Event``, does not foresee
    @streaming
    async def Watch(self, request: pb.WatchRequest,  # type: ignore[override]
                    context: Ctx[pb.WatchRequest, pb.Event | bytes],
                    ) -> AsyncGenerator[pb.Event | bytes, None]:
        types = convert.event_types(list(request.types))
        with self.streams.hold(context, "Watch"):
            async for message in self._watch(request, types, context):
                yield message

    async def _watch(self, request: pb.WatchRequest, types: frozenset[EventType],
                     context: Ctx[pb.WatchRequest, pb.Event | bytes],
                     ) -> AsyncGenerator[pb.Event | bytes, None]:
        """Events as encoded messages: each is yielded once encoded, and gRPC awaits its write before
        asking for the next, so a stream holds one message in flight and nothing decoded for it."""
        try:
            rt = await self._runtime(request.runtime_id, context)
        except Moved as moved:
            if self.forwarder is None:
                raise
            async for reply in self.forwarder.stream("Watch", request, context, moved, pb.Event):
                yield reply
            return
        await rt.fetch(request.handle)  # parked on disk: read off the event loop
        events = rt.watch(request.after_seq, types, request.handle)
        last = request.after_seq
        try:
            async for event in events:
                last = event.seq or last
                encoded = convert.event_to(event).SerializeToString()
                del event  # not held while the client takes its time
                yield encoded
        except FellBehind as behind:
            context.set_trailing_metadata(((RESUME_AFTER_HEADER, str(behind.after_seq)),))
            raise
        finally:
            # end the engine's subscription now (a cancelled stream), not when the generator is collected
            await events.aclose()
        if self._closing.is_set():
            raise Unavailable(f"{SHUTTING_DOWN}; Watch again with after_seq={last}")
        if rt.retired:
            raise Unavailable(f"{rt.retired}; Watch again with after_seq={last}")

    @streaming
    async def Connect(self, request_iterator: AsyncIterator[pb.WorkerMessage],
                      context: Ctx[pb.WorkerMessage, pb.DaemonMessage],
                      ) -> AsyncGenerator[pb.DaemonMessage, None]:
        self._require_open()
        first = await anext(request_iterator, None)
        hello = first if isinstance(first, pb.WorkerMessage) and first.HasField("hello") else None
        rid = hello.hello.runtime_id if hello is not None else ""
        if hello is not None and rid and self.forwarder is not None:
            try:
                await self._runtime(rid, context)
            except Moved as moved:  # the worker's runtime lives on another daemon: relay the stream
                async for reply in self.forwarder.bidi("Connect", hello, request_iterator, context, moved,
                                                       pb.DaemonMessage):
                    yield reply
                return
        worker = serve_worker(self._engine, self._hub, _after(first, request_iterator), context)
        try:
            async for message in worker:
                yield message
        finally:
            await worker.aclose()
        if self._closing.is_set():
            raise Unavailable(f"{SHUTTING_DOWN}; unanswered calls are re-sent when the worker reconnects")
        if rid and self.forwarder is not None and not self._engine.holds(rid):
            raise Unavailable("the runtime moved to another daemon of the cluster; reconnect (unanswered "
                              "calls are re-sent there)")


async def _after(first: T | None, rest: AsyncIterator[T]) -> AsyncIterator[T]:
    """``first`` (read already), then the rest of the stream."""
    if first is None:
        return
    yield first
    async for item in rest:
        yield item
