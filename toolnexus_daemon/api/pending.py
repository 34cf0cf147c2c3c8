"""ListPending and ListRuntimes: the requests checked and converted; the engine reads the inbox.

The engine (``engine.verbs.inbox``) reads the store's indexes, never its loaded runtimes, so in a
cluster any daemon answers for every runtime of the shared database, and it applies the runtime
keys. Here: the page size (default 100, at most 1000; a page may come back shorter with a
``next_page_token`` when the caller may see few of many rows), the filters, and the page tokens —
opaque: base64url of JSON naming the last row looked at.
"""

from __future__ import annotations

import base64
import binascii
import json
import math

from ..clock import rfc3339
from ..engine.verbs.inbox import Inbox, PendingItem, RuntimeSummary, presented
from ..errors import InvalidArgument
from ..store.base import PendingQuery, PendingRow
from ..store.codec import MAX_ID_BYTES
from . import convert
from ._gen import runtime_pb2 as pb

DEFAULT_PAGE = 100
MAX_PAGE = 1000
MAX_KIND_BYTES = 250


def page_size(requested: int) -> int:
    """0 → the default; above the maximum → the maximum (as AIP-158 coerces); negative → refused."""
    if requested < 0:
        raise InvalidArgument(f"page_size must not be negative (0 = {DEFAULT_PAGE}, at most {MAX_PAGE})")
    return min(requested or DEFAULT_PAGE, MAX_PAGE)


def check_kind(kind: str) -> None:
    if len(kind.encode()) > MAX_KIND_BYTES or "\x00" in kind:
        raise InvalidArgument(f"kind must be at most {MAX_KIND_BYTES} bytes of UTF-8 without NUL")


# ------------------------------------------------------------------ ListPending

def pending_query(request: pb.ListPendingRequest, now: float) -> PendingQuery:
    """The store query of a request (filters, age window, cursor); INVALID_ARGUMENT for bad values."""
    check_kind(request.kind)
    if request.min_age_ms < 0 or request.max_age_ms < 0:
        raise InvalidArgument("min_age_ms and max_age_ms must not be negative (max_age_ms 0 = no limit)")
    if request.max_age_ms and request.max_age_ms < request.min_age_ms:
        raise InvalidArgument(f"max_age_ms ({request.max_age_ms}) is below min_age_ms "
                              f"({request.min_age_ms}): no suspension can be both")
    after = _row_from_token(request.page_token) if request.page_token else None
    return PendingQuery(runtime_id=request.runtime_id or None, kind=request.kind or None,
                        oldest=now - request.max_age_ms / 1000 if request.max_age_ms else None,
                        newest=now - request.min_age_ms / 1000 if request.min_age_ms else None,
                        after=after, limit=page_size(request.page_size))


async def list_pending(inbox: Inbox, query: PendingQuery, key: str) -> pb.ListPendingResponse:
    """One page for a caller that presented ``key``; a runtime filter naming an unknown runtime is
    NOT_FOUND, one whose key was not presented PERMISSION_DENIED."""
    page = await inbox.pending(query, presented(key))
    out = pb.ListPendingResponse(items=[item_to(item) for item in page.items])
    if page.next is not None:
        out.next_page_token = _token(page.next)
    return out


def item_to(item: PendingItem) -> pb.PendingItem:
    return pb.PendingItem(request=convert.request_to(item.request), runtime_id=item.runtime_id,
                          handle=item.handle, top_handle=item.top_handle,
                          created_at=rfc3339(item.since) if item.since else "",
                          expires_at=item.request.expires_at or "", agent=item.agent, version=item.version)


def _token(row: PendingRow) -> str:
    raw = json.dumps(["p", row.since, row.runtime_id, row.handle_id], separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def _row_from_token(token: str) -> PendingRow:
    found = _decoded(token)
    if (len(found) != 4 or found[0] != "p" or not isinstance(found[1], (int, float))
            or not math.isfinite(found[1]) or found[1] < 0
            or not all(isinstance(x, str) and 0 < len(x.encode()) <= MAX_ID_BYTES for x in found[2:])):
        raise InvalidArgument("page_token is not one this daemon's ListPending returned; "
                              "start again without it")
    return PendingRow(float(found[1]), str(found[2]), str(found[3]))


def _decoded(token: str) -> list[object]:
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        found = json.loads(raw)
    except (binascii.Error, ValueError):
        raise InvalidArgument("page_token is not one this daemon returned; start again without it") from None
    return found if isinstance(found, list) else []


# ------------------------------------------------------------------ ListRuntimes

async def list_runtimes(inbox: Inbox, request: pb.ListRuntimesRequest, key: str) -> pb.ListRuntimesResponse:
    """One page of runtime summaries in id order, from the runtimes table and each census."""
    size = page_size(request.page_size)
    after = _runtime_from_token(request.page_token) if request.page_token else ""
    page = await inbox.runtimes(after, size, presented(key))
    out = pb.ListRuntimesResponse(runtimes=[_summary_to(s) for s in page.items])
    if page.next:
        out.next_page_token = _runtime_token(page.next)
    return out


def _summary_to(summary: RuntimeSummary) -> pb.RuntimeSummary:
    return pb.RuntimeSummary(runtime_id=summary.runtime_id,
                             created_at=rfc3339(summary.created_at) if summary.created_at else "",
                             handles=summary.handles, pending=summary.pending, keyed=summary.keyed,
                             version=summary.version)


def _runtime_token(rid: str) -> str:
    return base64.urlsafe_b64encode(json.dumps(["r", rid]).encode()).decode().rstrip("=")


def _runtime_from_token(token: str) -> str:
    found = _decoded(token)
    if len(found) != 2 or found[0] != "r" or not isinstance(found[1], str):
        raise InvalidArgument("page_token is not one this daemon's ListRuntimes returned; "
                              "start again without it")
    return found[1]
