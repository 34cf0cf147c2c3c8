"""What the inspector shows, read from the store: runtimes, one runtime's handles and events, the
pending inbox. Every list is a page (never a whole table), and only of runtimes the session may
see: unprotected ones and those whose key it holds.

Reads go to the store rather than the engine's loaded runtimes, so in a cluster any daemon shows
every runtime of the shared database (as ``ListRuntimes``/``ListPending`` do). They are blocking
store calls: the routes run them in a thread.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import math
from dataclasses import dataclass
from typing import Generic, TypeVar

from ...errors import StoreError
from ...model import JSON, Event, Request
from ...store.base import HandleKey, PendingQuery, PendingRow, Store
from .sessions import Session

T = TypeVar("T")
log = logging.getLogger("toolnexus_daemon.inspector")

RUNTIMES_PAGE = 50
PENDING_PAGE = 50
EVENTS_PAGE = 100
# one page looks at most at this many rows per item it shows (runtimes the session cannot see are skipped)
SCAN_FACTOR = 10
# a runtime's handle tree shows at most this many handles
MAX_TREE = 1000


class BadCursor(ValueError):
    """A page cursor this inspector did not make."""


class Visibility:
    """Which runtimes a session may see; runtime records are read once per page."""

    def __init__(self, store: Store, session: Session) -> None:
        self._store = store
        self._session = session
        self._keys: dict[str, str | None] = {}

    def key_of(self, runtime_id: str) -> str | None:
        """The runtime's key digest ("" when unprotected); None when it does not exist."""
        if runtime_id not in self._keys:
            rec = self._store.get_runtime(runtime_id)
            self._keys[runtime_id] = None if rec is None else str(rec.get("key_digest") or "")
        return self._keys[runtime_id]

    def sees(self, runtime_id: str) -> bool:
        key = self.key_of(runtime_id)
        return key is not None and (not key or self._session.holds(key))


@dataclass(frozen=True)
class RuntimeRow:
    runtime_id: str
    created_at: float
    handles: dict[str, int]
    pending: int
    keyed: bool


@dataclass(frozen=True)
class Page(Generic[T]):
    items: list[T]
    next_cursor: str = ""


def runtimes(store: Store, seen: Visibility, cursor: str) -> Page[RuntimeRow]:
    after = _decode(cursor, "r") if cursor else ""
    if not isinstance(after, str):
        raise BadCursor("bad page cursor")
    ids = [rid for rid in store.runtime_ids() if rid > after]
    out: list[RuntimeRow] = []
    looked = 0
    for rid in ids[:RUNTIMES_PAGE * SCAN_FACTOR]:
        looked += 1
        if seen.sees(rid):
            rec = store.get_runtime(rid) or {}
            census = store.census(rid)
            out.append(RuntimeRow(rid, float(rec.get("created_at") or 0.0), census.states,
                                  sum(n for n, _ in census.open.values()), bool(seen.key_of(rid))))
        if len(out) >= RUNTIMES_PAGE:
            break
    return Page(out, _encode("r", ids[looked - 1]) if looked < len(ids) else "")


@dataclass(frozen=True)
class PendingEntry:
    runtime_id: str
    handle: str
    agent: str
    since: float
    request: Request


def pending(store: Store, seen: Visibility, cursor: str, runtime_id: str | None = None) -> Page[PendingEntry]:
    """Open suspensions oldest first (of one runtime, or all), from the store's pending index."""
    after = _row(cursor) if cursor else None
    out: list[PendingEntry] = []
    budget = PENDING_PAGE * SCAN_FACTOR
    while budget > 0:
        ask = min(budget, PENDING_PAGE)
        rows = store.pending(PendingQuery(runtime_id=runtime_id, after=after, limit=ask))
        budget -= len(rows)
        visible = [r for r in rows if seen.sees(r.runtime_id)]
        records = dict(zip(visible, _records(store, [(r.runtime_id, r.handle_id) for r in visible]),
                           strict=True))
        for row in rows:
            after = row
            entry = _entry(row, records.get(row))
            if entry is not None:
                out.append(entry)
            if len(out) >= PENDING_PAGE:
                return Page(out, _encode("p", [row.since, row.runtime_id, row.handle_id]))
        if len(rows) < ask:
            return Page(out)
    return Page(out, _encode("p", [after.since, after.runtime_id, after.handle_id]) if after else "")


def _records(store: Store, keys: list[HandleKey]) -> list[JSON | None]:
    """The handle records of ``keys`` in one read; when that read meets a damaged record, each is
    read alone and the damaged ones are left out (logged), so one bad record hides no one else's
    request."""
    try:
        return store.get_handles(keys)
    except StoreError:
        return [_record(store, key) for key in keys]


def _record(store: Store, key: HandleKey) -> JSON | None:
    try:
        return store.get_handle(*key)
    except StoreError as exc:
        log.error("inspector: skipped a handle record that cannot be read",
                  extra={"runtime": key[0], "handle": key[1], "error": str(exc)})
        return None


def _entry(row: PendingRow, rec: JSON | None) -> PendingEntry | None:
    req = rec.get("pending") if rec is not None else None
    if rec is None or rec.get("state") != "suspended" or not isinstance(req, dict):
        return None  # answered meanwhile
    return PendingEntry(row.runtime_id, row.handle_id, str(rec.get("agent") or ""), row.since,
                        Request.from_json(req))


def handles(store: Store, runtime_id: str) -> tuple[list[JSON], bool]:
    """The runtime's handle records in tree order (parents before children), and whether the tree
    was cut at ``MAX_TREE``."""
    recs = store.handles(runtime_id)
    cut = len(recs) > MAX_TREE
    return sorted(recs[:MAX_TREE], key=lambda r: str(r.get("id") or "").split("/")), cut


@dataclass(frozen=True)
class EventPage:
    events: list[Event]
    after: int  # the page starts after this seq
    last_seq: int  # the runtime's last stored seq


def events(store: Store, runtime_id: str, after: int | None, before: int | None = None) -> EventPage:
    """A page of stored events: those after ``after``, or else the page that ends just before
    ``before``, or else the newest page."""
    last = store.last_seq(runtime_id)
    limit = EVENTS_PAGE
    if after is not None:
        start = max(0, min(after, last))
    elif before is not None:
        end = max(0, min(before - 1, last))
        start, limit = max(0, end - EVENTS_PAGE), max(1, min(EVENTS_PAGE, end))
    else:
        start = max(0, last - EVENTS_PAGE)
    # bounded by bytes too: a page of large events is not read whole
    page = store.events(runtime_id, start, limit, max_bytes=1 << 20)
    return EventPage(page, start, last)


def _encode(kind: str, value: object) -> str:
    return base64.urlsafe_b64encode(json.dumps([kind, value]).encode()).decode().rstrip("=")


def _decode(cursor: str, kind: str) -> object:
    try:
        found = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (binascii.Error, ValueError):
        raise BadCursor("bad page cursor") from None
    if not isinstance(found, list) or len(found) != 2 or found[0] != kind:
        raise BadCursor("bad page cursor")
    return found[1]


def _row(cursor: str) -> PendingRow:
    found = _decode(cursor, "p")
    if (not isinstance(found, list) or len(found) != 3 or not isinstance(found[0], (int, float))
            or not math.isfinite(found[0]) or not all(isinstance(x, str) and x for x in found[1:])):
        raise BadCursor("bad page cursor")
    return PendingRow(float(found[0]), str(found[1]), str(found[2]))
