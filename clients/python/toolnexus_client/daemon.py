"""Daemon: the calls about a whole toolnexus daemon rather than one runtime (docs/protocol.md §10).

A person's inbox, a dashboard or an approval bot starts without a runtime id in
hand: ``Daemon`` lists the open suspensions across runtimes (``list_pending``,
paged, or ``iter_pending`` over every page), the runtimes (``list_runtimes``),
follows the suspensions live (``watch_pending``) and answers one
(``resume``) once it knows where it waits. Runtimes protected by a key are
shown only when their key is passed (``runtime_key``; the daemon takes one key
per call, so a caller holding several keys makes one ``Daemon`` per key).
``target``/``token`` default to ``$TOOLNEXUS_TARGET``/``$TOOLNEXUS_TOKEN`` as
``Runtime.new`` does.

A blocking face over ``toolnexus_client.aio.Daemon`` (the core) on a private
event loop (``_loop.LoopThread``): ``_rpc`` runs the core's call there, with its
error mapping, and ``watch_pending`` iterates the core's stream.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Any, TypeVar

import grpc

from . import _common as common
from . import _convert as convert
from . import _pending as pending
from ._gen import runtime_pb2 as pb
from ._loop import LoopThread
from ._pending import MAX_PAGES, PendingItem, PendingPage, RuntimePage, RuntimeSummary
from ._pending_watch import PendingStream
from ._types import Answer, Info, ResumeResult
from .aio._daemon import Daemon as CoreDaemon

__all__ = ["MAX_PAGES", "Daemon"]

R = TypeVar("R")


class Daemon:
    """A connection to a daemon for its daemon-wide views; close it (or use ``with``) when done."""

    def __init__(self, target: str | None = None, *, token: str | None = None,
                 runtime_key: str | None = None,
                 credentials: grpc.ChannelCredentials | None = None) -> None:
        self._loop = LoopThread(1, name="toolnexus-daemon-client")
        self._core = self._loop.call(lambda: CoreDaemon(target, token=token, runtime_key=runtime_key,
                                                        credentials=credentials))
        self.target = self._core.target
        self._stub, self._metadata = self._core._stub, self._core._metadata

    def list_pending(self, runtime_id: str | None = None, kind: str | None = None, min_age_ms: int = 0,
                     max_age_ms: int = 0, page_size: int = 0, page_token: str = "",
                     timeout: float | None = 30.0) -> PendingPage:
        """One page of open suspensions, oldest first; pass ``next_page_token`` back for the next."""
        request = pending.list_pending_request(runtime_id, kind, min_age_ms, max_age_ms, page_size,
                                               page_token)
        return pending.pending_page_from_pb(self._rpc(self._stub.ListPending, request, timeout))

    def iter_pending(self, runtime_id: str | None = None, kind: str | None = None, min_age_ms: int = 0,
                     max_age_ms: int = 0, page_size: int = 0) -> Iterator[PendingItem]:
        """Every open suspension matching the filters, page after page, oldest first."""
        token = ""
        for _ in range(MAX_PAGES):
            page = self.list_pending(runtime_id, kind, min_age_ms, max_age_ms, page_size, token)
            yield from page.items
            token = page.next_page_token
            if not token:
                return

    def list_runtimes(self, page_size: int = 0, page_token: str = "",
                      timeout: float | None = 30.0) -> RuntimePage:
        """One page of runtimes with their handle counts by state."""
        request = pending.list_runtimes_request(page_size, page_token)
        return pending.runtime_page_from_pb(self._rpc(self._stub.ListRuntimes, request, timeout))

    def iter_runtimes(self, page_size: int = 0) -> Iterator[RuntimeSummary]:
        """Every runtime the caller may see, page after page."""
        token = ""
        for _ in range(MAX_PAGES):
            page = self.list_runtimes(page_size, token)
            yield from page.runtimes
            token = page.next_page_token
            if not token:
                return

    def watch_pending(self, runtime_id: str | None = None, kind: str | None = None) -> PendingStream:
        """The open suspensions (an ADDED each, then SYNCED), then ADDED / REMOVED live; reopened
        from the start after UNAVAILABLE (see ``PendingStream``)."""
        return PendingStream(self._loop.call(lambda: self._core.watch_pending(runtime_id, kind)), self._loop)

    def resume(self, runtime_id: str, answer: Answer | Mapping[str, Any], handle: str | None = None,
               no_wait: bool = False, timeout: float | None = None) -> ResumeResult:
        """Answer a pending request of ``runtime_id`` (an item of ``list_pending`` says which)."""
        request = common.resume_request(runtime_id, answer, handle, no_wait)
        return convert.resume_from_pb(self._rpc(self._stub.Resume, request, timeout))

    def info(self, timeout: float | None = 30.0) -> Info:
        return convert.info_from_pb(self._rpc(self._stub.Info, pb.InfoRequest(), timeout))

    def close(self) -> None:
        """End every watch this object opened and close the channel. Idempotent."""
        if not self._loop.closed:
            try:
                self._loop.run(self._core.close())
            finally:
                self._loop.close()

    def __enter__(self) -> Daemon:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _rpc(self, method: Callable[..., Awaitable[R]], request: Any, timeout: float | None) -> R:
        """One call of the core's stub, run by the core on the loop (its error mapping included)."""
        return self._loop.run(self._core._rpc(method, request, timeout))
