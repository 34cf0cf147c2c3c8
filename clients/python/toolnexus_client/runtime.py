"""Runtime: one agent runtime on a toolnexus daemon, driven synchronously from Python.

A blocking face over the asyncio client (``toolnexus_client.aio.Runtime``, the
core): each ``Runtime`` owns a private event loop on a daemon thread
(``_loop.LoopThread``) where the core's channel, worker stream and watches
live, and every method runs the core's coroutine there and waits for it, so a
fix to a verb, the worker or a watch lands once, in the core (see ``_loop``
for why this design rather than a shared sans-IO core).

``Runtime.new`` creates the runtime (or reattaches to ``runtime_id``), then,
when this process has something to serve (native tools with an ``execute``, a
model ``transport``, a ``wait_for`` resolver), opens the worker stream and
returns only once the daemon welcomed it, so a ``wake`` right after never races
a missing worker. Plain tools, the transport and the resolver run in a pool of
``max_workers`` threads and may call back into the runtime. gRPC failures
surface as ToolnexusError subclasses. ``detach()`` (or ``close()`` without a
handle, or leaving a ``with`` block) only disconnects this client: the runtime
and its handles live on in the daemon and can be reattached from another process.
"""

from __future__ import annotations

import builtins
from collections.abc import Coroutine, Iterable, Mapping, Sequence
from typing import Any, TypeVar, overload

import grpc

from ._common import DEFAULT_TARGET
from ._defs import Budget, Llm, Registry
from ._dispatch import Resolver, Transport
from ._loop import LoopThread
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
from .aio._runtime import Runtime as CoreRuntime

__all__ = ["DEFAULT_TARGET", "Runtime"]

R = TypeVar("R")


class Runtime:
    """A connected runtime; build it with ``Runtime.new``."""

    def __init__(self, core: CoreRuntime, loop: LoopThread) -> None:
        self._core = core
        self._loop = loop
        self.worker = WorkerStream(core.worker, loop) if core.worker is not None else None

    @property
    def id(self) -> str:
        return self._core.id

    @property
    def root(self) -> str:
        return self._core.root

    @property
    def reattached(self) -> bool:
        return self._core.reattached

    @property
    def version(self) -> int:
        """The runtime's latest registry version once New returned (docs/versions.md)."""
        return self._core.version

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
        loop = LoopThread(max_workers)
        core = _started(loop, CoreRuntime.new(
            target, registry, transport=transport, llm=llm, runtime_id=runtime_id, options=options,
            wait_for=wait_for, token=token, runtime_key=runtime_key, credentials=credentials,
            worker_id=worker_id, connect_timeout=connect_timeout, worker_versions=worker_versions))
        return cls(core, loop)

    @classmethod
    def serve(cls, target: str | None = None, registry: Registry | None = None, *, runtime_id: str,
              versions: Sequence[int], transport: Transport | None = None, token: str | None = None,
              runtime_key: str | None = None, credentials: grpc.ChannelCredentials | None = None,
              worker_id: str | None = None, connect_timeout: float = 10.0, max_workers: int = 8) -> Runtime:
        """Serve the native tools of ``registry`` for the registry ``versions`` of an existing runtime,
        without a New (which would make ``registry`` the latest version): an app's older build keeps
        serving the handles still pinned to its version while a newer build serves the latest."""
        loop = LoopThread(max_workers)
        core = _started(loop, CoreRuntime.serve(
            target, registry, runtime_id=runtime_id, versions=versions, transport=transport, token=token,
            runtime_key=runtime_key, credentials=credentials, worker_id=worker_id,
            connect_timeout=connect_timeout))
        return cls(core, loop)

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
        core: Any = self._core  # both overloads at once: the core checks the combination
        spawned: str | Woken = self._run(core.spawn(parent, agent, budget, prompt=prompt, wait=wait))
        return spawned

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
        if wait is None:
            return self._run(self._core.wake(handle, prompt, upgrade=upgrade))
        return self._run(self._core.wake(handle, prompt, wait=wait, upgrade=upgrade))

    def wait(self, handle: str, timeout: float | None = None) -> TaskResult:
        """The next result of ``handle``; after ``timeout`` seconds a ``timeout`` result."""
        return self._run(self._core.wait(handle, timeout))

    def resume(self, answer: Answer | Mapping[str, Any], handle: str | None = None,
               no_wait: bool = False, accept_changed_definition: bool = False,
               upgrade: bool = False) -> ResumeResult:
        """Answer a pending Request (routed by ``answer.id``) and wait for the cascade to settle.

        A suspended tool whose definition changed since it suspended (``snapshot(h).definition_changed``)
        is refused with FailedPrecondition unless ``accept_changed_definition`` is set."""
        return self._run(self._core.resume(answer, handle, no_wait, accept_changed_definition, upgrade))

    def snapshot(self, handle: str) -> HandleSnapshot:
        return self._run(self._core.snapshot(handle))

    def watch(self, after_seq: int = 0, types: Iterable[str] | None = None,
              handle: str | None = None) -> EventStream:
        """Every stored event with ``seq > after_seq``, then live ones, until cancelled or detached;
        a stream the daemon ends with UNAVAILABLE (a restart, a runtime moving in a cluster) is
        reopened after the last seq received, so nothing is missed or repeated."""
        kinds = builtins.list(types or ())
        return EventStream(self._loop.call(lambda: self._core.watch(after_seq, kinds, handle)), self._loop)

    def post(self, handle: str, text: str, sender: str = "app", channel: str = "message") -> PostResult:
        """Append an inbox item ``{from: sender, channel, text}`` for the handle's next wake."""
        return self._run(self._core.post(handle, text, sender, channel))

    def interrupt(self, handle: str) -> InterruptResult:
        """Abort a running turn, or cancel a suspended handle's pending request."""
        return self._run(self._core.interrupt(handle))

    def close(self, handle: str | None = None) -> None:
        """With a handle: close it and its subtree (the Close RPC). Without: ``detach()``."""
        if handle is None:
            self.detach()
            return
        self._run(self._core.close(handle))

    def list(self) -> builtins.list[HandleSnapshot]:
        """Every handle of the runtime (pre-order, root excluded)."""
        return self._run(self._core.list())

    def info(self) -> Info:
        return self._run(self._core.info())

    def versions(self) -> builtins.list[VersionUse]:
        """The runtime's registry versions, oldest first, with how many handles each holds."""
        return self._run(self._core.versions())

    def shutdown(self, purge: bool = False) -> None:
        """Close every handle in the daemon (keeping the final state unless ``purge``), then detach.

        Open watches still deliver the closing events, then end quietly."""
        try:
            self._run(self._core.shutdown(purge))
        finally:
            self.detach()

    def detach(self) -> None:
        """Stop serving, end open watches and close the channel; the runtime lives on. Idempotent."""
        self.worker = None
        if self._loop.closed:
            return
        try:
            self._run(self._core.detach())
        finally:
            self._loop.close()

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.detach()

    def _run(self, coro: Coroutine[Any, Any, R]) -> R:
        return self._loop.run(coro)


def _started(loop: LoopThread, made: Coroutine[Any, Any, CoreRuntime]) -> CoreRuntime:
    """The core ``made`` on ``loop``; the loop closed again when that fails."""
    try:
        return loop.run(made)
    except BaseException:
        loop.close()
        raise
