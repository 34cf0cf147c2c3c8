"""Daemon: the calls about a whole toolnexus daemon rather than one runtime (docs/protocol.md §10).

A person's inbox, a dashboard or an approval bot starts without a runtime id in
hand: ``Daemon`` lists the open suspensions across runtimes (``list_pending``,
paged, or ``iter_pending`` over every page), the runtimes (``list_runtimes``),
follows the suspensions live (``watch_pending``) and answers one
(``resume``) once it knows where it waits. A console looking after any runtime
also reads and changes one by its id without holding a ``Runtime``:
``list_handles``, ``snapshot``, ``list_versions``, ``watch``, ``new_runtime``
(from a registry file's JSON), ``spawn``, ``wake``, ``post``, ``interrupt``,
``close_handle``, ``shutdown_runtime`` and ``shutdown_daemon``. Runtimes protected by a key are
shown only when their key is passed (``runtime_key``; the daemon takes one key
per call, so a caller holding several keys makes one ``Daemon`` per key).
``target``/``token`` default to ``$TOOLNEXUS_TARGET``/``$TOOLNEXUS_TOKEN`` as
``Runtime.new`` does.

A blocking face over ``toolnexus_client.aio.Daemon`` (the core) on a private
event loop (``_loop.LoopThread``): ``_rpc`` runs the core's call there, with its
error mapping, and ``watch_pending`` iterates the core's stream.
"""

from __future__ import annotations

import builtins
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from typing import Any, TypeVar

import grpc

from . import _common as common
from . import _convert as convert
from . import _daemon_calls as calls
from . import _pending as pending
from ._daemon_calls import Created
from ._gen import runtime_pb2 as pb
from ._loop import LoopThread
from ._pending import MAX_PAGES, PendingItem, PendingPage, RuntimePage, RuntimeSummary
from ._pending_watch import PendingStream
from ._types import (
    Answer,
    HandleSnapshot,
    Info,
    InterruptResult,
    PostResult,
    ResumeResult,
    VersionUse,
    Woken,
)
from ._watch import EventStream
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
               no_wait: bool = False, timeout: float | None = None, *,
               accept_changed_definition: bool = False, upgrade: bool = False) -> ResumeResult:
        """Answer a pending request of ``runtime_id`` (an item of ``list_pending`` says which);
        ``accept_changed_definition`` and ``upgrade`` as for ``Runtime.resume``."""
        request = common.resume_request(runtime_id, answer, handle, no_wait, accept_changed_definition,
                                         upgrade)
        return convert.resume_from_pb(self._rpc(self._stub.Resume, request, timeout))

    # ------------------------------------------------------------ one runtime, named by id

    def list_handles(self, runtime_id: str, timeout: float | None = 30.0) -> builtins.list[HandleSnapshot]:
        """Every handle of ``runtime_id`` in pre-order (root excluded), from one consistent read."""
        reply = self._rpc(self._stub.List, pb.ListRequest(runtime_id=runtime_id), timeout)
        return [convert.snapshot_from_pb(h) for h in reply.handles]

    def snapshot(self, runtime_id: str, handle: str, timeout: float | None = 30.0) -> HandleSnapshot:
        request = pb.SnapshotRequest(runtime_id=runtime_id, handle=handle)
        return convert.snapshot_from_pb(self._rpc(self._stub.Snapshot, request, timeout))

    def list_versions(self, runtime_id: str, timeout: float | None = 30.0) -> builtins.list[VersionUse]:
        """The registry versions of ``runtime_id``, oldest first, with how many handles each holds."""
        reply = self._rpc(self._stub.ListVersions, pb.ListVersionsRequest(runtime_id=runtime_id), timeout)
        return [convert.version_use_from_pb(v) for v in reply.versions]

    def watch(self, runtime_id: str, after_seq: int = 0, types: Iterable[str] | None = None,
              handle: str | None = None, *, reopen: bool = True) -> EventStream:
        """The events of ``runtime_id`` after ``after_seq``, then live ones (``Runtime.watch``);
        ``reopen=False``: a stream the daemon ends with UNAVAILABLE ends iteration with the error,
        for a caller that reopens it itself (after ``Event.seq`` of the last event it kept)."""
        kinds = builtins.list(types or ())
        core = self._loop.call(lambda: self._core.watch(runtime_id, after_seq, kinds, handle, reopen=reopen))
        return EventStream(core, self._loop)

    def new_runtime(self, definition: Mapping[str, Any], runtime_id: str | None = None,
                    runtime_key: str | None = None, timeout: float | None = 30.0) -> Created:
        """Create a runtime (or reattach to ``runtime_id``) from ``definition``, a ``NewRequest`` in
        the proto's JSON mapping; serves nothing (``Runtime.new`` serves native tools)."""
        request = calls.new_request(definition, runtime_id, runtime_key)
        return calls.created_from_pb(self._rpc(self._stub.New, request, timeout))

    def spawn(self, runtime_id: str, parent: str, agent: str, *, prompt: str | None = None,
              wait: float | None = None, timeout: float | None = 30.0) -> Woken:
        """A new child of ``parent`` (empty: root) running ``agent``, woken with ``prompt`` if given
        (its turn's result when ``wait`` seconds are given too); see ``Runtime.spawn``."""
        request = common.spawn_request(runtime_id, parent, agent, None, prompt, wait)
        reply = self._rpc(self._stub.Spawn, request, timeout)
        return convert.woken_from_pb(reply.handle, reply)

    def wake(self, runtime_id: str, handle: str, prompt: str, *, wait: float | None = None,
             upgrade: bool = False, timeout: float | None = 30.0) -> Woken:
        """idle→running with ``prompt`` (``Runtime.wake``); ``queued`` says it waits its turn."""
        request = common.wake_request(runtime_id, handle, prompt, wait, upgrade)
        return convert.woken_from_pb(handle, self._rpc(self._stub.Wake, request, timeout))

    def post(self, runtime_id: str, handle: str, text: str, sender: str = "app", channel: str = "message",
             timeout: float | None = 30.0) -> PostResult:
        request = common.post_request(runtime_id, handle, text, sender, channel)
        return convert.post_result_from_pb(self._rpc(self._stub.Post, request, timeout))

    def interrupt(self, runtime_id: str, handle: str, timeout: float | None = 30.0) -> InterruptResult:
        request = pb.InterruptRequest(runtime_id=runtime_id, handle=handle)
        return convert.interrupt_result_from_pb(self._rpc(self._stub.Interrupt, request, timeout))

    def close_handle(self, runtime_id: str, handle: str, timeout: float | None = 30.0) -> None:
        """Close ``handle`` and its subtree (``close()`` closes this connection)."""
        self._rpc(self._stub.Close, pb.CloseRequest(runtime_id=runtime_id, handle=handle), timeout)

    def shutdown_runtime(self, runtime_id: str, purge: bool = False, timeout: float | None = 30.0) -> None:
        """Close every handle of ``runtime_id``, keeping its final state unless ``purge``."""
        self._rpc(self._stub.Shutdown, calls.shutdown_request(runtime_id, purge), timeout)

    def shutdown_daemon(self, timeout: float | None = 30.0) -> None:
        """Stop the whole daemon, as SIGTERM does."""
        self._rpc(self._stub.Shutdown, calls.shutdown_request(None, False), timeout)

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
