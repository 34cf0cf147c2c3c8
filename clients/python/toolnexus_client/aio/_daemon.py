"""Daemon: the daemon-wide calls of docs/protocol.md §10 from asyncio (no threads).

The coroutines of the blocking ``toolnexus_client.Daemon`` over a ``grpc.aio``
channel; requests and values are shared with it (``_pending``).
"""

from __future__ import annotations

import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, TypeVar

import grpc
import grpc.aio

from .. import _common as common
from .. import _convert as convert
from .. import _pending as pending
from .._gen import runtime_pb2 as pb
from .._gen import runtime_pb2_grpc as pb_grpc
from .._pending import MAX_PAGES, PendingItem, PendingPage, RuntimePage, RuntimeSummary
from .._types import Answer, Info, ResumeResult
from ..errors import from_rpc_error
from ._pending import PendingStream

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
        self._streams: weakref.WeakSet[PendingStream] = weakref.WeakSet()

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
                     no_wait: bool = False, timeout: float | None = None) -> ResumeResult:
        request = common.resume_request(runtime_id, answer, handle, no_wait)
        return convert.resume_from_pb(await self._rpc(self._stub.Resume, request, timeout))

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
