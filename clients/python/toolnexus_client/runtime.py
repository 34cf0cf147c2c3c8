"""Runtime: one agent runtime on a toolnexus daemon, driven synchronously from Python.

``Runtime.new`` creates the runtime (or reattaches to ``runtime_id``) over a
plain sync gRPC channel, then, when this process has something to serve
(native tools with an ``execute``, a model ``transport``, a ``wait_for``
resolver), opens the worker stream and returns only once the daemon welcomed
it, so a ``wake`` right after never races a missing worker. Every verb is a
thin blocking wrapper over one RPC; gRPC failures surface as ToolnexusError
subclasses. ``detach()`` (or ``close()`` without a handle, or leaving a
``with`` block) only disconnects this client: the runtime and its handles
live on in the daemon and can be reattached from another process.
"""

from __future__ import annotations

import builtins
import threading
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar, overload

import grpc

from . import _common as common
from . import _convert as convert
from ._common import DEFAULT_TARGET, call_metadata, resolve_llm, resolve_target, resolve_token, with_trace
from ._defs import Budget, Llm, Registry
from ._dispatch import Dispatcher, Resolver, Transport
from ._gen import runtime_pb2 as pb
from ._gen import runtime_pb2_grpc as pb_grpc
from ._types import (
    Answer,
    HandleSnapshot,
    Info,
    InterruptResult,
    PostResult,
    ResumeResult,
    TaskResult,
    VersionUse,
    Woken,
)
from ._watch import EventStream
from ._worker import WorkerStream
from .errors import from_rpc_error

__all__ = ["DEFAULT_TARGET", "Runtime"]

R = TypeVar("R")


def _open_channel(target: str, credentials: grpc.ChannelCredentials | None) -> grpc.Channel:
    if credentials is not None:
        return grpc.secure_channel(target, credentials, options=common.CHANNEL_OPTIONS)
    return grpc.insecure_channel(target, options=common.CHANNEL_OPTIONS)


class Runtime:
    """A connected runtime; build it with ``Runtime.new``."""

    def __init__(self, channel: grpc.Channel, runtime_id: str, root: str, reattached: bool,
                 metadata: Sequence[tuple[str, str]] = (), worker: WorkerStream | None = None) -> None:
        self._channel = channel
        self._stub = pb_grpc.AgentRuntimeStub(channel)
        self.id = runtime_id
        self.root = root
        self.reattached = reattached
        # the runtime's latest registry version once New returned (docs/versions.md)
        self.version = 0
        self._metadata = tuple(metadata)
        self.worker = worker
        # the watches this client opened: detach/shutdown end them quietly before closing the channel
        self._streams: weakref.WeakSet[EventStream] = weakref.WeakSet()
        self._streams_lock = threading.Lock()

    @classmethod
    def new(cls, target: str | None = None, registry: Registry | None = None, *,
            transport: Transport | None = None, llm: Llm | Mapping[str, Any] | None = None,
            runtime_id: str | None = None, options: Mapping[str, Any] | None = None,
            wait_for: Resolver | None = None, token: str | None = None, runtime_key: str | None = None,
            credentials: grpc.ChannelCredentials | None = None, worker_id: str | None = None,
            connect_timeout: float = 10.0, worker_versions: Sequence[int] = (),
            max_workers: int = 8) -> Runtime:
        """Create a runtime (or reattach to ``runtime_id``) and start serving its tools.

        ``target``/``token`` default to ``$TOOLNEXUS_TARGET``/``$TOOLNEXUS_TOKEN``."""
        if registry is None:
            raise ValueError("Runtime.new needs a registry (toolnexus_client.registry(...))")
        resolved_llm = resolve_llm(llm, transport)
        metadata = call_metadata(resolve_token(token), runtime_key)
        channel = _open_channel(resolve_target(target), credentials)
        try:
            request = convert.new_request(registry, resolved_llm, options, runtime_id, runtime_key)
            reply = _invoke(pb_grpc.AgentRuntimeStub(channel).New, request, metadata, None)
            tools = registry.native_tools()
            dispatcher = Dispatcher(reply.runtime_id, tools, transport, wait_for, max_workers)
            worker = _start_worker(channel, dispatcher, metadata, worker_id, connect_timeout,
                                  worker_versions)
        except BaseException:
            channel.close()
            raise
        made = cls(channel, reply.runtime_id, reply.root, reply.reattached, metadata, worker)
        made.version = int(reply.version.number)
        return made

    @classmethod
    def serve(cls, target: str | None = None, registry: Registry | None = None, *, runtime_id: str,
              versions: Sequence[int], transport: Transport | None = None, token: str | None = None,
              runtime_key: str | None = None, credentials: grpc.ChannelCredentials | None = None,
              worker_id: str | None = None, connect_timeout: float = 10.0, max_workers: int = 8) -> Runtime:
        """Serve the native tools of ``registry`` for the registry ``versions`` of an existing runtime,
        without a New (which would make ``registry`` the latest version): an app's older build keeps
        serving the handles still pinned to its version while a newer build serves the latest."""
        if registry is None:
            raise ValueError("Runtime.serve needs the registry whose tools it serves")
        if not versions:
            raise ValueError("Runtime.serve needs the registry versions it serves (Runtime.version of the "
                             "New that deployed them)")
        metadata = call_metadata(resolve_token(token), runtime_key)
        channel = _open_channel(resolve_target(target), credentials)
        try:
            dispatcher = Dispatcher(runtime_id, registry.native_tools(), transport, None, max_workers)
            worker = _start_worker(channel, dispatcher, metadata, worker_id, connect_timeout, versions)
        except BaseException:
            channel.close()
            raise
        return cls(channel, runtime_id, "root", True, metadata, worker)

    # ------------------------------------------------------------ verbs

    @overload
    def spawn(self, parent: str, agent: str, budget: Budget | Mapping[str, int] | None = None, *,
              prompt: None = None) -> str: ...
    @overload
    def spawn(self, parent: str, agent: str, budget: Budget | Mapping[str, int] | None = None, *,
              prompt: str, wait: float | None = None) -> Woken: ...

    def spawn(self, parent: str, agent: str, budget: Budget | Mapping[str, int] | None = None, *,
              prompt: str | None = None, wait: float | None = None) -> str | Woken:
        """A new idle child handle of ``parent`` running ``agent``; returns its id.

        With ``prompt`` the handle is also woken, in the same durable commit (one call instead of
        spawn then wake), and a ``Woken`` is returned; with ``wait`` (seconds, at most an hour) it
        also carries the settled result of that turn, as ``wait(handle, wait)`` would return it."""
        request = common.spawn_request(self.id, parent, agent, budget, prompt, wait)
        reply = self._rpc(self._stub.Spawn, request, common.fused_deadline(wait))
        return convert.woken_from_pb(reply.handle, reply) if prompt is not None else str(reply.handle)

    @overload
    def wake(self, handle: str, prompt: str, *, wait: None = None, upgrade: bool = False) -> bool: ...
    @overload
    def wake(self, handle: str, prompt: str, *, wait: float, upgrade: bool = False) -> Woken: ...

    def wake(self, handle: str, prompt: str, *, wait: float | None = None,
             upgrade: bool = False) -> bool | Woken:
        """idle→running with ``prompt``; returns once durable (True if the wake was queued).

        With ``wait`` (seconds, at most an hour) it returns a ``Woken`` carrying the settled result
        of the turn it started (a queued wake: the turn that consumes it), or a ``timeout`` result,
        in one call: the daemon registers the wait before the wake is acknowledged."""
        request = common.wake_request(self.id, handle, prompt, wait, upgrade)
        reply = self._rpc(self._stub.Wake, request, common.fused_deadline(wait))
        return bool(reply.queued) if wait is None else convert.woken_from_pb(handle, reply)

    def wait(self, handle: str, timeout: float | None = None) -> TaskResult:
        """The next result of ``handle``; after ``timeout`` seconds a ``timeout`` result."""
        request, deadline = common.wait_request(self.id, handle, timeout)
        return convert.task_result_from_pb(self._rpc(self._stub.Wait, request, deadline))

    def resume(self, answer: Answer | Mapping[str, Any], handle: str | None = None,
               no_wait: bool = False, accept_changed_definition: bool = False,
                     upgrade: bool = False) -> ResumeResult:
        """Answer a pending Request (routed by ``answer.id``) and wait for the cascade to settle.

        A suspended tool whose definition changed since it suspended (``snapshot(h).definition_changed``)
        is refused with FailedPrecondition unless ``accept_changed_definition`` is set."""
        request = common.resume_request(self.id, answer, handle, no_wait, accept_changed_definition, upgrade)
        return convert.resume_from_pb(self._rpc(self._stub.Resume, request))

    def snapshot(self, handle: str) -> HandleSnapshot:
        request = pb.SnapshotRequest(runtime_id=self.id, handle=handle)
        return convert.snapshot_from_pb(self._rpc(self._stub.Snapshot, request))

    def watch(self, after_seq: int = 0, types: Iterable[str] | None = None,
              handle: str | None = None) -> EventStream:
        """Every stored event with ``seq > after_seq``, then live ones, until cancelled or detached;
        a stream the daemon ends with UNAVAILABLE (a restart, a runtime moving in a cluster) is
        reopened after the last seq received, so nothing is missed or repeated."""
        kinds = list(types or ())  # asked again on every reopen: an iterator would be spent

        def open_call(after: int) -> Any:
            request = common.watch_request(self.id, after, kinds, handle)
            return self._stub.Watch(request, metadata=self._metadata)

        stream = EventStream(open_call, after_seq)
        with self._streams_lock:
            self._streams.add(stream)
        return stream

    def post(self, handle: str, text: str, sender: str = "app", channel: str = "message") -> PostResult:
        """Append an inbox item ``{from: sender, channel, text}`` for the handle's next wake."""
        request = common.post_request(self.id, handle, text, sender, channel)
        return convert.post_result_from_pb(self._rpc(self._stub.Post, request))

    def interrupt(self, handle: str) -> InterruptResult:
        """Abort a running turn, or cancel a suspended handle's pending request."""
        request = pb.InterruptRequest(runtime_id=self.id, handle=handle)
        return convert.interrupt_result_from_pb(self._rpc(self._stub.Interrupt, request))

    def close(self, handle: str | None = None) -> None:
        """With a handle: close it and its subtree (the Close RPC). Without: ``detach()``."""
        if handle is None:
            self.detach()
            return
        self._rpc(self._stub.Close, pb.CloseRequest(runtime_id=self.id, handle=handle))

    def list(self) -> builtins.list[HandleSnapshot]:
        """Every handle of the runtime (pre-order, root excluded)."""
        reply = self._rpc(self._stub.List, pb.ListRequest(runtime_id=self.id))
        return [convert.snapshot_from_pb(h) for h in reply.handles]

    def info(self) -> Info:
        return convert.info_from_pb(self._rpc(self._stub.Info, pb.InfoRequest(runtime_id=self.id)))

    def versions(self) -> builtins.list[VersionUse]:
        """The runtime's registry versions, oldest first, with how many handles each holds."""
        reply = self._rpc(self._stub.ListVersions, pb.ListVersionsRequest(runtime_id=self.id))
        return [convert.version_use_from_pb(v) for v in reply.versions]

    def shutdown(self, purge: bool = False) -> None:
        """Close every handle in the daemon (keeping the final state unless ``purge``), then detach.

        Open watches still deliver the closing events, then end quietly."""
        for stream in self._open_streams():
            stream.ending()
        try:
            self._rpc(self._stub.Shutdown, pb.ShutdownRequest(runtime_id=self.id, purge=purge))
        finally:
            self.detach()

    def detach(self) -> None:
        """Stop serving, end open watches and close the channel; the runtime lives on. Idempotent."""
        for stream in self._open_streams():
            stream.cancel()
        if self.worker is not None:
            self.worker.stop()
            self.worker = None
        self._channel.close()

    def _open_streams(self) -> builtins.list[EventStream]:
        with self._streams_lock:
            return builtins.list(self._streams)

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.detach()

    def _rpc(self, method: Callable[..., R], request: Any, timeout: float | None = None) -> R:
        return _invoke(method, request, self._metadata, timeout)


def _invoke(method: Callable[..., R], request: Any, metadata: Sequence[tuple[str, str]],
            timeout: float | None) -> R:
    """One unary call with the runtime's metadata; a grpc.RpcError becomes a ToolnexusError."""
    try:
        return method(request, metadata=with_trace(metadata), timeout=timeout)
    except grpc.RpcError as err:
        raise from_rpc_error(err) from err


def _start_worker(channel: grpc.Channel, dispatcher: Dispatcher, metadata: Sequence[tuple[str, str]],
                  worker_id: str | None, timeout: float, versions: Sequence[int] = ()) -> WorkerStream | None:
    """Open the worker stream if this process serves anything, and wait for its Welcome."""
    if not (dispatcher.tools or dispatcher.transport or dispatcher.resolver):
        dispatcher.close()
        return None
    hello = common.worker_hello(dispatcher, worker_id, versions)
    worker = WorkerStream(channel, hello, dispatcher, metadata)
    worker.start(timeout)
    return worker
