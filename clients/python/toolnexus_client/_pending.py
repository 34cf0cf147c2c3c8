"""The daemon-wide views of docs/protocol.md §10: open suspensions and runtimes, as plain values.

``ListPending``, ``ListRuntimes`` and ``WatchPending`` name no runtime (or an
optional one), so they belong to the daemon rather than to a ``Runtime``:
``Daemon`` (blocking) and ``aio.Daemon`` share the values, the request
building and the conversion kept here, so the two cannot drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from . import _convert as convert
from ._gen import runtime_pb2 as pb
from ._types import Request

# a bound on the pages an iterator walks: a daemon handing out tokens forever must not loop us forever
MAX_PAGES = 100_000


class PendingChangeType(StrEnum):
    """What a ``WatchPending`` message says: an open suspension appeared or went, or the first
    full list has been sent (``SYNCED``, once per opened stream)."""

    ADDED = "ADDED"
    REMOVED = "REMOVED"
    SYNCED = "SYNCED"


@dataclass(frozen=True)
class PendingItem:
    """One open suspension: the request, where it waits (leaf and top-level handle) and since when."""

    request: Request
    runtime_id: str
    handle: str
    top_handle: str = ""
    created_at: str = ""
    expires_at: str | None = None
    agent: str = ""
    # the registry version the leaf runs: the one its answer is fed to
    version: int = 0


@dataclass(frozen=True)
class PendingPage:
    """One page of ``list_pending``; ``next_page_token`` is empty on the last page."""

    items: tuple[PendingItem, ...]
    next_page_token: str = ""


@dataclass(frozen=True)
class RuntimeSummary:
    """A runtime as ``list_runtimes`` shows it: handle counts by state (root excluded) and open
    suspensions; ``keyed`` when it is protected by a runtime key; its latest registry ``version``
    and the versions whose native calls wait for a worker (``versions_without_worker``)."""

    runtime_id: str
    created_at: str = ""
    handles: dict[str, int] = field(default_factory=dict)
    pending: int = 0
    keyed: bool = False
    version: int = 0
    versions_without_worker: tuple[int, ...] = ()


@dataclass(frozen=True)
class RuntimePage:
    """One page of ``list_runtimes``; ``next_page_token`` is empty on the last page."""

    runtimes: tuple[RuntimeSummary, ...]
    next_page_token: str = ""


@dataclass(frozen=True)
class PendingChange:
    """One ``WatchPending`` message; ``item`` is None on ``SYNCED``, ``reason`` set on ``REMOVED``
    (answered, expired, cancelled, closed)."""

    type: str
    item: PendingItem | None = None
    reason: str = ""


# ------------------------------------------------------------ requests

def list_pending_request(runtime_id: str | None, kind: str | None, min_age_ms: int, max_age_ms: int,
                         page_size: int, page_token: str) -> pb.ListPendingRequest:
    if min_age_ms < 0 or max_age_ms < 0 or page_size < 0:
        raise ValueError("min_age_ms, max_age_ms and page_size are >= 0 (0 = no limit / the default)")
    return pb.ListPendingRequest(runtime_id=runtime_id or "", kind=kind or "", min_age_ms=min_age_ms,
                                 max_age_ms=max_age_ms, page_size=page_size, page_token=page_token)


def list_runtimes_request(page_size: int, page_token: str) -> pb.ListRuntimesRequest:
    if page_size < 0:
        raise ValueError("page_size is >= 0 (0 = the default)")
    return pb.ListRuntimesRequest(page_size=page_size, page_token=page_token)


def watch_pending_request(runtime_id: str | None, kind: str | None) -> pb.WatchPendingRequest:
    return pb.WatchPendingRequest(runtime_id=runtime_id or "", kind=kind or "")


# ------------------------------------------------------------ replies

def item_from_pb(message: pb.PendingItem) -> PendingItem:
    return PendingItem(request=convert.request_from_pb(message.request), runtime_id=message.runtime_id,
                       handle=message.handle, top_handle=message.top_handle, created_at=message.created_at,
                       expires_at=message.expires_at or None, agent=message.agent, version=message.version)


def pending_page_from_pb(reply: pb.ListPendingResponse) -> PendingPage:
    return PendingPage(items=tuple(item_from_pb(i) for i in reply.items),
                       next_page_token=reply.next_page_token)


def summary_from_pb(message: pb.RuntimeSummary) -> RuntimeSummary:
    return RuntimeSummary(runtime_id=message.runtime_id, created_at=message.created_at,
                          handles=dict(message.handles), pending=message.pending, keyed=message.keyed,
                          version=message.version,
                          versions_without_worker=tuple(message.versions_without_worker))


def runtime_page_from_pb(reply: pb.ListRuntimesResponse) -> RuntimePage:
    return RuntimePage(runtimes=tuple(summary_from_pb(r) for r in reply.runtimes),
                       next_page_token=reply.next_page_token)


def change_from_pb(message: pb.PendingChange) -> PendingChange:
    item = item_from_pb(message.item) if message.HasField("item") else None
    return PendingChange(type=message.type, item=item, reason=message.reason)
