"""ListPending and ListRuntimes: the pending inbox and the runtimes, read from the store's indexes.

Both read the store, never the engine's loaded runtimes, so in a cluster any
daemon answers for every runtime of the shared database. Pages are bounded
twice: by ``page_size`` (default 100, at most 1000) and by how many rows one
call may look at (``SCAN_FACTOR`` times the page), so a caller who may see
few of many rows (runtimes protected by keys it lacks) gets a shorter page
with a ``next_page_token`` instead of a call that reads the whole index.
Page tokens are opaque: base64url of JSON naming the last row looked at.
A handle record that cannot be read (damaged on disk) is left out of the
page and logged with its key, so one bad record never hides every other
person's pending question.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import logging
import math
from dataclasses import dataclass, field, replace

from ..clock import rfc3339
from ..errors import InvalidArgument, NotFound, PermissionDenied, StoreError
from ..model import JSON, ROOT_ID, Request
from ..store.base import HandleKey, PendingQuery, PendingRow, Store
from ..store.codec import MAX_ID_BYTES
from . import convert
from ._gen import runtime_pb2 as pb

DEFAULT_PAGE = 100
MAX_PAGE = 1000
# one call looks at most at this many rows per item of its page (hidden runtimes are skipped)
SCAN_FACTOR = 10
MAX_KIND_BYTES = 250

log = logging.getLogger(__name__)


def page_size(requested: int) -> int:
    """0 → the default; above the maximum → the maximum (as AIP-158 coerces); negative → refused."""
    if requested < 0:
        raise InvalidArgument(f"page_size must not be negative (0 = {DEFAULT_PAGE}, at most {MAX_PAGE})")
    return min(requested or DEFAULT_PAGE, MAX_PAGE)


def digest(secret: str) -> str:
    """A runtime key as runtime records store it."""
    return hashlib.sha256(secret.encode()).hexdigest()


@dataclass
class Visibility:
    """Which runtimes a caller may see: unprotected ones, and those whose key it presented.
    Runtime records are read once per call and cached here."""

    store: Store
    presented: str
    _keys: dict[str, str | None] = field(default_factory=dict)

    def key_of(self, runtime_id: str) -> str | None:
        """The runtime's key digest ("" when unprotected); None when the runtime does not exist."""
        if runtime_id not in self._keys:
            rec = self.store.get_runtime(runtime_id)
            self._keys[runtime_id] = None if rec is None else str(rec.get("key_digest") or "")
        return self._keys[runtime_id]

    def sees(self, runtime_id: str) -> bool:
        key = self.key_of(runtime_id)
        return key is not None and (not key or hmac.compare_digest(key, digest(self.presented)))

    def check(self, runtime_id: str) -> None:
        """NOT_FOUND for an unknown runtime, PERMISSION_DENIED for a key not presented."""
        if self.key_of(runtime_id) is None:
            raise NotFound(f'unknown runtime "{runtime_id[:128]}"')
        if not self.sees(runtime_id):
            raise PermissionDenied(f'runtime "{runtime_id[:128]}" is protected by a runtime key; '
                                   "send it as x-toolnexus-runtime-key")


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


def list_pending(store: Store, query: PendingQuery, seen: Visibility) -> pb.ListPendingResponse:
    """One page: rows in index order, those of runtimes the caller may not see skipped; a runtime
    filter naming an unknown runtime is NOT_FOUND, one whose key was not presented PERMISSION_DENIED."""
    if query.runtime_id is not None:
        seen.check(query.runtime_id)
    wanted, budget = query.limit, query.limit * SCAN_FACTOR
    out = pb.ListPendingResponse()
    last = query.after
    while budget > 0:
        ask = min(budget, wanted)
        rows = store.pending(replace(query, after=last, limit=ask))
        budget -= len(rows)
        visible = [row for row in rows if seen.sees(row.runtime_id)]
        records = dict(zip(visible, _records(store, [(r.runtime_id, r.handle_id) for r in visible]),
                           strict=True))
        for row in rows:
            last = row
            item = item_of_record(row, records[row]) if row in records else None
            if item is not None:
                out.items.append(item)
            if len(out.items) >= wanted:
                out.next_page_token = _token(row)
                return out
        if len(rows) < ask:
            return out  # the index holds no more
    if last is not None:
        out.next_page_token = _token(last)  # looked at enough rows for one call: go on from here
    return out


def _records(store: Store, keys: list[HandleKey]) -> list[JSON | None]:
    """The handle records of ``keys`` in one read; when that read meets a damaged record, each is
    read alone and the damaged ones count as absent (logged), so the rest of the page still shows."""
    try:
        return store.get_handles(keys)
    except StoreError:
        return [_record(store, key) for key in keys]


def _record(store: Store, key: HandleKey) -> JSON | None:
    try:
        return store.get_handle(*key)
    except StoreError as exc:
        log.error("pending inbox: skipped a handle record that cannot be read",
                  extra={"runtime": key[0], "handle": key[1], "error": str(exc)})
        return None


def pending_item(store: Store, row: PendingRow) -> pb.PendingItem | None:
    """The item of an index row, from its handle record; None when that record moved on meanwhile."""
    return item_of_record(row, _record(store, (row.runtime_id, row.handle_id)))


def item_of_record(row: PendingRow, rec: JSON | None) -> pb.PendingItem | None:
    """The item of an index row given its handle record (None: the record moved on meanwhile)."""
    pending = rec.get("pending") if rec is not None else None
    if rec is None or rec.get("state") != "suspended" or not isinstance(pending, dict):
        return None
    return item_of(row.runtime_id, rec, pending, row.since)


def item_of(runtime_id: str, rec: JSON, pending: JSON, since: float) -> pb.PendingItem:
    req = Request.from_json(pending)
    hid = str(rec.get("id") or "")
    return pb.PendingItem(request=convert.request_to(req), runtime_id=runtime_id, handle=hid,
                          top_handle=top_handle(hid), created_at=rfc3339(since) if since else "",
                          expires_at=req.expires_at or "", agent=str(rec.get("agent") or ""),
                          version=int(rec.get("version") or 1))


def top_handle(handle_id: str) -> str:
    """The child of root on the way to ``handle_id`` (ids are paths from the root: ``root/a/b``)."""
    parts = handle_id.split("/")
    return "/".join(parts[:2]) if parts[0] == ROOT_ID and len(parts) > 1 else handle_id


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

def list_runtimes(store: Store, request: pb.ListRuntimesRequest, seen: Visibility) -> pb.ListRuntimesResponse:
    """One page of runtime summaries in id order, from the runtimes table and each census."""
    size = page_size(request.page_size)
    after = _runtime_from_token(request.page_token) if request.page_token else ""
    ids = [rid for rid in store.runtime_ids() if rid > after]
    out = pb.ListRuntimesResponse()
    looked = 0
    for rid in ids[:size * SCAN_FACTOR]:
        looked += 1
        if seen.sees(rid):
            out.runtimes.append(_summary(store, rid, seen))
        if len(out.runtimes) >= size:
            break
    if looked < len(ids):
        out.next_page_token = _runtime_token(ids[looked - 1])
    return out


def _summary(store: Store, rid: str, seen: Visibility) -> pb.RuntimeSummary:
    rec = store.get_runtime(rid) or {}
    census = store.census(rid)
    created = float(rec.get("created_at") or 0.0)
    return pb.RuntimeSummary(runtime_id=rid, created_at=rfc3339(created) if created else "",
                             handles=census.states, pending=sum(n for n, _ in census.open.values()),
                             keyed=bool(seen.key_of(rid)), version=_latest_version(rec))


def _latest_version(rec: JSON) -> int:
    """The runtime's latest registry version (1 for a runtime stored before versions)."""
    meta = rec.get("version")
    return int(meta.get("number") or 1) if isinstance(meta, dict) else 1


def _runtime_token(rid: str) -> str:
    return base64.urlsafe_b64encode(json.dumps(["r", rid]).encode()).decode().rstrip("=")


def _runtime_from_token(token: str) -> str:
    found = _decoded(token)
    if len(found) != 2 or found[0] != "r" or not isinstance(found[1], str):
        raise InvalidArgument("page_token is not one this daemon's ListRuntimes returned; "
                              "start again without it")
    return found[1]
