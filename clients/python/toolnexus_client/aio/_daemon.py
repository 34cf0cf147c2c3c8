"""Daemon: the daemon-wide calls of docs/protocol.md §10 from asyncio (no threads).

The coroutines of the blocking ``toolnexus_client.Daemon`` over a ``grpc.aio``
channel; requests and values are shared with it (``_pending``, ``_daemon_calls``),
the calls on one runtime named by id included.
"""

from __future__ import annotations

import builtins
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from typing import Any, TypeVar

import grpc
import grpc.aio

from .. import _common as common
from .. import _convert as convert
from .. import _daemon_calls as calls
from .. import _pending as pending
from .._daemon_calls import Created
from .._gen import runtime_pb2 as pb
from .._gen import runtime_pb2_grpc as pb_grpc
from .._pending import MAX_PAGES, PendingItem, PendingPage, RuntimePage, RuntimeSummary
from .._types import (
    Answer,
    HandleSnapshot,
    Info,
    InterruptResult,
    PostResult,
    ResumeResult,
    VersionUse,
    Woken,
)
from ..errors import from_rpc_error
from ._pending import PendingStream
from ._watch import RESUME, EventStream, ResumePolicy

R = TypeVar("R")


class Daemon:
    """A connection to a daemon for its daemon-wide views; ``await close()`` (or ``async with``)."""

    def __init__(self, target: str | None = None, *, token: str | None = None,
                 runtime_key: str | None = None,
                 credentials: grpc.ChannelCredentials | None = None) -> None:
        resolved = common.resolve_target(target)
        self.target = resolved
        self._channel = (grpc.aio.secure_channel(resolved, credentials, options=common.CHANNEL_OPTIONS)
                         if credentials is not None
                         else grpc.aio.insecure_channel(resolved, options=common.CHANNEL_OPTIONS))
        self._stub = pb_grpc.AgentRuntimeStub(self._channel)
        self._metadata = common.call_metadata(common.resolve_token(token), runtime_key)
        self._streams: weakref.WeakSet[PendingStream | EventStream] = weakref.WeakSet()

    async def list_pending(self, runtime_id: str | None = None, kind: str | None = None,
                           min_age_ms: int = 0, max_age_ms: int = 0, page_size: int = 0,
                           page_token: str = "", timeout: float | None = 30.0) -> PendingPage:
        """One page of open suspensions, oldest first; pass ``next_page_token`` back for the next."""
        request = pending.list_pending_request(runtime_id, kind, min_age_ms, max_age_ms, page_size,
                                               page_token)
        return pending.pending_page_from_pb(await self._rpc(self._stub.ListPending, request, timeout))

    async def iter_pending(self, runtime_id: str | None = None, kind: str | None = None,
                           min_age_ms: int = 0, max_age_ms: int = 0,
                           page_size: int = 0) -> AsyncIterator[PendingItem]:
        """Every open suspension matching the filters, page after page, oldest first."""
        token = ""
        for _ in range(MAX_PAGES):
            page = await self.list_pending(runtime_id, kind, min_age_ms, max_age_ms, page_size, token)
            for item in page.items:
                yield item
            token = page.next_page_token
            if not token:
                return

    async def list_runtimes(self, page_size: int = 0, page_token: str = "",
                            timeout: float | None = 30.0) -> RuntimePage:
        request = pending.list_runtimes_request(page_size, page_token)
        return pending.runtime_page_from_pb(await self._rpc(self._stub.ListRuntimes, request, timeout))

    async def iter_runtimes(self, page_size: int = 0) -> AsyncIterator[RuntimeSummary]:
        token = ""
        for _ in range(MAX_PAGES):
            page = await self.list_runtimes(page_size, token)
            for summary in page.runtimes:
                yield summary
            token = page.next_page_token
            if not token:
                return

    def watch_pending(self, runtime_id: str | None = None, kind: str | None = None) -> PendingStream:
        """The open suspensions (an ADDED each, then SYNCED), then ADDED / REMOVED live."""
        request = pending.watch_pending_request(runtime_id, kind)
        stream = PendingStream(lambda: self._stub.WatchPending(request, metadata=self._metadata))
        self._streams.add(stream)
        return stream

    async def resume(self, runtime_id: str, answer: Answer | Mapping[str, Any], handle: str | None = None,
                     no_wait: bool = False, timeout: float | None = None, *,
                     accept_changed_definition: bool = False, upgrade: bool = False) -> ResumeResult:
        request = common.resume_request(runtime_id, answer, handle, no_wait, accept_changed_definition,
                                         upgrade)
        return convert.resume_from_pb(await self._rpc(self._stub.Resume, request, timeout))

    # ------------------------------------------------------------ one runtime, named by id

    async def list_handles(self, runtime_id: str,
                           timeout: float | None = 30.0) -> builtins.list[HandleSnapshot]:
        reply = await self._rpc(self._stub.List, pb.ListRequest(runtime_id=runtime_id), timeout)
        return [convert.snapshot_from_pb(h) for h in reply.handles]

    async def snapshot(self, runtime_id: str, handle: str, timeout: float | None = 30.0) -> HandleSnapshot:
        request = pb.SnapshotRequest(runtime_id=runtime_id, handle=handle)
        return convert.snapshot_from_pb(await self._rpc(self._stub.Snapshot, request, timeout))

    async def list_versions(self, runtime_id: str, timeout: float | None = 30.0) -> builtins.list[VersionUse]:
        request = pb.ListVersionsRequest(runtime_id=runtime_id)
        reply = await self._rpc(self._stub.ListVersions, request, timeout)
        return [convert.version_use_from_pb(v) for v in reply.versions]

    def watch(self, runtime_id: str, after_seq: int = 0, types: Iterable[str] | None = None,
              handle: str | None = None, *, reopen: bool = True) -> EventStream:
        """``async for event in daemon.watch(runtime_id)``; ``reopen`` as for the blocking ``Daemon``."""
        kinds = builtins.list(types or ())

        def open_call(after: int) -> Any:
            request = common.watch_request(runtime_id, after, kinds, handle)
            return self._stub.Watch(request, metadata=self._metadata)

        stream = EventStream(open_call, after_seq, RESUME if reopen else ResumePolicy(attempts=0))
        self._streams.add(stream)
        return stream

    async def new_runtime(self, definition: Mapping[str, Any], runtime_id: str | None = None,
                          runtime_key: str | None = None, timeout: float | None = 30.0) -> Created:
        request = calls.new_request(definition, runtime_id, runtime_key)
        return calls.created_from_pb(await self._rpc(self._stub.New, request, timeout))

    async def spawn(self, runtime_id: str, parent: str, agent: str, *, prompt: str | None = None,
                    wait: float | None = None, timeout: float | None = 30.0) -> Woken:
        request = common.spawn_request(runtime_id, parent, agent, None, prompt, wait)
        reply = await self._rpc(self._stub.Spawn, request, timeout)
        return convert.woken_from_pb(reply.handle, reply)

    async def wake(self, runtime_id: str, handle: str, prompt: str, *, wait: float | None = None,
                   upgrade: bool = False, timeout: float | None = 30.0) -> Woken:
        request = common.wake_request(runtime_id, handle, prompt, wait, upgrade)
        return convert.woken_from_pb(handle, await self._rpc(self._stub.Wake, request, timeout))

    async def post(self, runtime_id: str, handle: str, text: str, sender: str = "app",
                   channel: str = "message", timeout: float | None = 30.0) -> PostResult:
        request = common.post_request(runtime_id, handle, text, sender, channel)
        return convert.post_result_from_pb(await self._rpc(self._stub.Post, request, timeout))

    async def interrupt(self, runtime_id: str, handle: str, timeout: float | None = 30.0) -> InterruptResult:
        request = pb.InterruptRequest(runtime_id=runtime_id, handle=handle)
        return convert.interrupt_result_from_pb(await self._rpc(self._stub.Interrupt, request, timeout))

    async def close_handle(self, runtime_id: str, handle: str, timeout: float | None = 30.0) -> None:
        await self._rpc(self._stub.Close, pb.CloseRequest(runtime_id=runtime_id, handle=handle), timeout)

    async def shutdown_runtime(self, runtime_id: str, purge: bool = False,
                               timeout: float | None = 30.0) -> None:
        await self._rpc(self._stub.Shutdown, calls.shutdown_request(runtime_id, purge), timeout)

    async def shutdown_daemon(self, timeout: float | None = 30.0) -> None:
        await self._rpc(self._stub.Shutdown, calls.shutdown_request(None, False), timeout)

    async def info(self, timeout: float | None = 30.0) -> Info:
        return convert.info_from_pb(await self._rpc(self._stub.Info, pb.InfoRequest(), timeout))

    async def close(self) -> None:
        """End every watch this object opened and close the channel. Idempotent."""
        for stream in list(self._streams):
            stream.cancel()
        await self._channel.close()

    async def __aenter__(self) -> Daemon:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _rpc(self, method: Callable[..., Awaitable[R]], request: Any, timeout: float | None) -> R:
        try:
            return await method(request, metadata=common.with_trace(self._metadata), timeout=timeout)
        except grpc.RpcError as err:
            raise from_rpc_error(err) from err
