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
import os
import socket
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import grpc

from . import _convert as convert
from ._defs import Budget, Llm, Registry
from ._dispatch import Dispatcher, Resolver, Transport
from ._gen import runtime_pb2 as pb
from ._gen import runtime_pb2_grpc as pb_grpc
from ._types import Answer, HandleSnapshot, Info, ResumeResult, TaskResult
from ._watch import EventStream
from ._worker import WorkerStream
from .errors import from_rpc_error

DEFAULT_TARGET = "127.0.0.1:50051"
RUNTIME_KEY_HEADER = "x-toolnexus-runtime-key"
# grpc's own reconnect backoff grows to minutes; a sidecar that restarts should be found again quickly
CHANNEL_OPTIONS = (("grpc.initial_reconnect_backoff_ms", 100), ("grpc.min_reconnect_backoff_ms", 100),
                   ("grpc.max_reconnect_backoff_ms", 2000))
# a Wait with a timeout is answered by the daemon; the deadline only guards against a dead one
WAIT_DEADLINE_SLACK = 10.0

R = TypeVar("R")


def _metadata(token: str | None, runtime_key: str | None) -> tuple[tuple[str, str], ...]:
    pairs: list[tuple[str, str]] = []
    if token:
        pairs.append(("authorization", f"Bearer {token}"))
    if runtime_key:
        pairs.append((RUNTIME_KEY_HEADER, runtime_key))
    return tuple(pairs)


def _resolve_llm(llm: Llm | Mapping[str, Any] | None, transport: Transport | None) -> Llm:
    if llm is None:
        if transport is None:
            raise ValueError("Runtime.new needs llm= (a model config) or transport= (a model callable)")
        return Llm(style="worker")
    resolved = Llm.of(llm)
    if transport is not None and resolved.style != "worker":
        raise ValueError(f"transport= serves llm style 'worker', but llm style is {resolved.style!r}")
    return resolved


def _worker_id() -> str:
    return f"py-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def _open_channel(target: str, credentials: grpc.ChannelCredentials | None) -> grpc.Channel:
    if credentials is not None:
        return grpc.secure_channel(target, credentials, options=CHANNEL_OPTIONS)
    return grpc.insecure_channel(target, options=CHANNEL_OPTIONS)


class Runtime:
    """A connected runtime; build it with ``Runtime.new``."""

    def __init__(self, channel: grpc.Channel, runtime_id: str, root: str, reattached: bool,
                 metadata: Sequence[tuple[str, str]] = (), worker: WorkerStream | None = None) -> None:
        self._channel = channel
        self._stub = pb_grpc.AgentRuntimeStub(channel)
        self.id = runtime_id
        self.root = root
        self.reattached = reattached
        self._metadata = tuple(metadata)
        self.worker = worker

    @classmethod
    def new(cls, target: str = DEFAULT_TARGET, registry: Registry | None = None, *,
            transport: Transport | None = None, llm: Llm | Mapping[str, Any] | None = None,
            runtime_id: str | None = None, options: Mapping[str, Any] | None = None,
            wait_for: Resolver | None = None, token: str | None = None, runtime_key: str | None = None,
            credentials: grpc.ChannelCredentials | None = None, worker_id: str | None = None,
            connect_timeout: float = 10.0, max_workers: int = 8) -> Runtime:
        """Create a runtime (or reattach to ``runtime_id``) and start serving its tools."""
        if registry is None:
            raise ValueError("Runtime.new needs a registry (toolnexus_client.registry(...))")
        resolved_llm = _resolve_llm(llm, transport)
        metadata = _metadata(token, runtime_key)
        channel = _open_channel(target, credentials)
        try:
            request = convert.new_request(registry, resolved_llm, options, runtime_id, runtime_key)
            reply = _invoke(pb_grpc.AgentRuntimeStub(channel).New, request, metadata, None)
            tools = registry.native_tools()
            dispatcher = Dispatcher(reply.runtime_id, tools, transport, wait_for, max_workers)
            worker = _start_worker(channel, dispatcher, metadata, worker_id, connect_timeout)
        except BaseException:
            channel.close()
            raise
        return cls(channel, reply.runtime_id, reply.root, reply.reattached, metadata, worker)

    # ------------------------------------------------------------ verbs

    def spawn(self, parent: str, agent: str, budget: Budget | Mapping[str, int] | None = None) -> str:
        """A new idle child handle of ``parent`` running ``agent``; returns its id."""
        request = pb.SpawnRequest(runtime_id=self.id, parent=parent, agent=agent)
        resolved = Budget.of(budget)
        if resolved is not None:
            request.budget.CopyFrom(convert.budget_to_pb(resolved))
        return str(self._rpc(self._stub.Spawn, request).handle)

    def wake(self, handle: str, prompt: str) -> bool:
        """idle→running with ``prompt``; returns once durable (True if the wake was queued)."""
        return bool(self._rpc(self._stub.Wake, pb.WakeRequest(runtime_id=self.id, handle=handle,
                                                              prompt=prompt)).queued)

    def wait(self, handle: str, timeout: float | None = None) -> TaskResult:
        """The next result of ``handle``; after ``timeout`` seconds a ``timeout`` result."""
        timeout_ms = 0 if timeout is None else max(1, round(timeout * 1000))
        deadline = None if timeout is None else timeout + WAIT_DEADLINE_SLACK
        request = pb.WaitRequest(runtime_id=self.id, handle=handle, timeout_ms=timeout_ms)
        return convert.task_result_from_pb(self._rpc(self._stub.Wait, request, deadline))

    def resume(self, answer: Answer | Mapping[str, Any], handle: str | None = None,
               no_wait: bool = False) -> ResumeResult:
        """Answer a pending Request (routed by ``answer.id``) and wait for the cascade to settle."""
        request = pb.ResumeRequest(runtime_id=self.id, answer=convert.answer_to_pb(Answer.of(answer)),
                                   handle=handle or "", no_wait=no_wait)
        return convert.resume_from_pb(self._rpc(self._stub.Resume, request))

    def snapshot(self, handle: str) -> HandleSnapshot:
        request = pb.SnapshotRequest(runtime_id=self.id, handle=handle)
        return convert.snapshot_from_pb(self._rpc(self._stub.Snapshot, request))

    def watch(self, after_seq: int = 0, types: Iterable[str] | None = None,
              handle: str | None = None) -> EventStream:
        """Every stored event with ``seq > after_seq``, then live ones, until cancelled."""
        request = pb.WatchRequest(runtime_id=self.id, after_seq=after_seq, types=list(types or ()),
                                  handle=handle or "")
        return EventStream(self._stub.Watch(request, metadata=self._metadata))

    def post(self, handle: str, text: str, sender: str = "app", channel: str = "message") -> None:
        """Append an inbox item ``{from: sender, channel, text}`` for the handle's next wake."""
        item = convert.inbox_item_to_pb(sender, channel, text)
        self._rpc(self._stub.Post, pb.PostRequest(runtime_id=self.id, handle=handle, item=item))

    def interrupt(self, handle: str) -> None:
        """Abort a running turn, or cancel a suspended handle's pending request."""
        self._rpc(self._stub.Interrupt, pb.InterruptRequest(runtime_id=self.id, handle=handle))

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

    def shutdown(self, purge: bool = False) -> None:
        """Close every handle in the daemon (keeping the final state unless ``purge``), then detach."""
        try:
            self._rpc(self._stub.Shutdown, pb.ShutdownRequest(runtime_id=self.id, purge=purge))
        finally:
            self.detach()

    def detach(self) -> None:
        """Stop serving and close the channel; the runtime lives on in the daemon. Idempotent."""
        if self.worker is not None:
            self.worker.stop()
            self.worker = None
        self._channel.close()

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
        return method(request, metadata=metadata, timeout=timeout)
    except grpc.RpcError as err:
        raise from_rpc_error(err) from err


def _start_worker(channel: grpc.Channel, dispatcher: Dispatcher, metadata: Sequence[tuple[str, str]],
                  worker_id: str | None, timeout: float) -> WorkerStream | None:
    """Open the worker stream if this process serves anything, and wait for its Welcome."""
    serves_tools = bool(dispatcher.tools)
    if not (serves_tools or dispatcher.transport or dispatcher.resolver):
        dispatcher.close()
        return None
    hello = pb.WorkerHello(runtime_id=dispatcher.runtime_id, worker_id=worker_id or _worker_id(),
                           tools=sorted(dispatcher.tools), llm=dispatcher.transport is not None,
                           resolver=dispatcher.resolver is not None, no_tools=not dispatcher.tools)
    worker = WorkerStream(channel, hello, dispatcher, metadata)
    worker.start(timeout)
    return worker
