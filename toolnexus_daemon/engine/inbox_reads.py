"""The pending inbox and the runtime list, read from the store's indexes: what ``ListPending``,
``ListRuntimes``, ``WatchPending`` and the inspector show.

These read the store, never the loaded runtimes, so in a cluster any daemon answers for every
runtime of the shared database. Every read here is a synchronous function of the store run
inside one ``Store.read`` (the ``Inbox`` methods): on PostgreSQL it runs on a reader thread and the
event loop waits on no round trip; LMDB and memory read inline. Values returned are domain values
(``PendingItem``, ``RuntimeSummary``); the gRPC edge and the inspector only convert them.

Tenancy: a caller sees unprotected runtimes and those whose key it holds (``Visibility``, given a
``holds`` test of a key digest). Pages are bounded twice: by their size and by how many index rows
one call may look at (``SCAN_FACTOR`` times the page), so a caller who may see few of many rows gets
a shorter page with a cursor instead of a call that reads the whole index. A handle record that
cannot be read (damaged on disk) is left out and logged with its key, so one bad record never
hides every other person's pending question.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from ..errors import NotFound, PermissionDenied, StoreError
from ..model import JSON, ROOT_ID, Request
from ..store.base import HandleKey, PendingQuery, PendingRow, Store

# one call looks at most at this many rows per item of its page (hidden runtimes are skipped)
SCAN_FACTOR = 10
# a watch reads the open suspensions in pages of this many rows
WATCH_PAGE = 1000

# the engine's logger (a name that stays put when the engine's modules move)
log = logging.getLogger("toolnexus_daemon.engine")

# a suspension's identity in a watch: runtime id, leaf handle, since
SuspensionKey = tuple[str, str, float]
# whether the caller holds the key of this digest
Holds = Callable[[str], bool]


def digest(secret: str) -> str:
    """A runtime key as runtime records store it."""
    return hashlib.sha256(secret.encode()).hexdigest()


def presented(secret: str) -> Holds:
    """The ``holds`` test of a caller that presented ``secret`` (or nothing: "")."""
    mine = digest(secret)
    return lambda key: hmac.compare_digest(key, mine)


# ------------------------------------------------------------------ values


@dataclass(frozen=True)
class PendingItem:
    """One open suspension: the leaf ``handle`` of ``runtime_id`` waiting on ``request`` since
    ``since`` (seconds since the epoch; 0 when unknown)."""

    runtime_id: str
    handle: str
    since: float
    request: Request
    agent: str
    version: int

    @property
    def top_handle(self) -> str:
        """The child of root on the way to the handle (ids are paths from the root: ``root/a/b``)."""
        parts = self.handle.split("/")
        return "/".join(parts[:2]) if parts[0] == ROOT_ID and len(parts) > 1 else self.handle


@dataclass(frozen=True)
class PendingPage:
    """A page of the inbox and the row to go on after (None: the index holds no more)."""

    items: list[PendingItem]
    next: PendingRow | None = None


@dataclass(frozen=True)
class RuntimeSummary:
    """A runtime as the list shows it: handles by state, open suspensions, whether keyed, and its
    latest registry version."""

    runtime_id: str
    created_at: float
    handles: dict[str, int]
    pending: int
    keyed: bool
    version: int


@dataclass(frozen=True)
class RuntimePage:
    """A page of runtimes in id order and the id to go on after ("": no more)."""

    items: list[RuntimeSummary]
    next: str = ""


@dataclass(frozen=True)
class OpenSuspension:
    """An open suspension as a watch keeps it, with the key digest its runtime had when it was read
    ("" = unprotected): a runtime purged and created again under another key is a new set."""

    item: PendingItem
    key: str


# what a watch already holds, by runtime: those suspensions are not read again
Known = Mapping[str, Mapping[SuspensionKey, OpenSuspension]]


# ------------------------------------------------------------------ tenancy


@dataclass
class Visibility:
    """Which runtimes a caller may see: unprotected ones, and those whose key it holds. Runtime
    records are read once per call and cached here (inside the call's ``Store.read``)."""

    holds: Holds
    _keys: dict[str, str | None] = field(default_factory=dict)

    def key_of(self, store: Store, runtime_id: str) -> str | None:
        """The runtime's key digest ("" when unprotected); None when the runtime does not exist."""
        if runtime_id not in self._keys:
            rec = store.get_runtime(runtime_id)
            self._keys[runtime_id] = None if rec is None else str(rec.get("key_digest") or "")
        return self._keys[runtime_id]

    def sees(self, store: Store, runtime_id: str) -> bool:
        key = self.key_of(store, runtime_id)
        return key is not None and (not key or self.holds(key))

    def check(self, store: Store, runtime_id: str) -> None:
        """NOT_FOUND for an unknown runtime, PERMISSION_DENIED for a key not presented."""
        if self.key_of(store, runtime_id) is None:
            raise NotFound(f'unknown runtime "{runtime_id[:128]}"')
        if not self.sees(store, runtime_id):
            raise PermissionDenied(f'runtime "{runtime_id[:128]}" is protected by a runtime key; '
                                   "send it as x-toolnexus-runtime-key")


# ------------------------------------------------------------------ the engine's face


class Inbox:
    """The reads above, each one ``Store.read`` of ``store`` (off the event loop on PostgreSQL)."""

    def __init__(self, store: Store) -> None:
        self._store = store

    async def pending(self, query: PendingQuery, holds: Holds) -> PendingPage:
        return await self._store.read(functools.partial(list_pending, query=query, seen=Visibility(holds)))

    async def runtimes(self, after: str, size: int, holds: Holds) -> RuntimePage:
        return await self._store.read(functools.partial(list_runtimes, after=after, size=size,
                                                        seen=Visibility(holds)))

    async def check(self, runtime_id: str, holds: Holds) -> None:
        """NOT_FOUND / PERMISSION_DENIED unless the caller may see ``runtime_id``."""
        await self._store.read(functools.partial(Visibility(holds).check, runtime_id=runtime_id))

    async def sees(self, runtime_id: str, holds: Holds) -> bool:
        return await self._store.read(functools.partial(Visibility(holds).sees, runtime_id=runtime_id))

    async def key_of(self, runtime_id: str) -> str | None:
        """The runtime's key digest ("" when unprotected); None when it does not exist."""
        return await self._store.read(functools.partial(Visibility(_nobody).key_of, runtime_id=runtime_id))

    async def open_suspensions(self, runtime_ids: set[str] | None,
                               known: Known) -> dict[SuspensionKey, OpenSuspension]:
        """Every open suspension (of ``runtime_ids``; None: all), those in ``known`` not read again."""
        return await self._store.read(functools.partial(read_open, runtime_ids=runtime_ids, known=known))

    async def why_removed(self, items: list[PendingItem]) -> list[str]:
        """Why each suspension left the index, from what the store holds now."""
        return await self._store.read(lambda store: [removal_reason(store, item) for item in items])


def _nobody(_key: str) -> bool:
    return False


# ------------------------------------------------------------------ the inbox (inside Store.read)


def list_pending(store: Store, query: PendingQuery, seen: Visibility) -> PendingPage:
    """One page: rows in index order, those of runtimes the caller may not see skipped; a runtime
    filter naming an unknown runtime is NOT_FOUND, one whose key was not presented PERMISSION_DENIED."""
    if query.runtime_id is not None:
        seen.check(store, query.runtime_id)
    wanted, budget = query.limit, query.limit * SCAN_FACTOR
    out: list[PendingItem] = []
    last = query.after
    while budget > 0:
        ask = min(budget, wanted)
        rows = store.pending(replace(query, after=last, limit=ask))
        budget -= len(rows)
        visible = [row for row in rows if seen.sees(store, row.runtime_id)]
        records = dict(zip(visible, _records(store, [(r.runtime_id, r.handle_id) for r in visible]),
                           strict=True))
        for row in rows:
            last = row
            item = item_of_record(row, records[row]) if row in records else None
            if item is not None:
                out.append(item)
            if len(out) >= wanted:
                return PendingPage(out, row)
        if len(rows) < ask:
            return PendingPage(out)  # the index holds no more
    return PendingPage(out, last)  # looked at enough rows for one call: go on from here


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


def pending_item(store: Store, row: PendingRow) -> PendingItem | None:
    """The item of an index row, from its handle record; None when that record moved on meanwhile."""
    return item_of_record(row, _record(store, (row.runtime_id, row.handle_id)))


def item_of_record(row: PendingRow, rec: JSON | None) -> PendingItem | None:
    """The item of an index row given its handle record (None: the record moved on meanwhile)."""
    pending = rec.get("pending") if rec is not None else None
    if rec is None or rec.get("state") != "suspended" or not isinstance(pending, dict):
        return None
    return PendingItem(runtime_id=row.runtime_id, handle=str(rec.get("id") or ""), since=row.since,
                       request=Request.from_json(pending), agent=str(rec.get("agent") or ""),
                       version=int(rec.get("version") or 1))


# ------------------------------------------------------------------ the runtimes


def list_runtimes(store: Store, after: str, size: int, seen: Visibility) -> RuntimePage:
    """One page of runtime summaries in id order (after ``after``), from the runtimes table and
    each runtime's census."""
    ids = [rid for rid in store.runtime_ids() if rid > after]
    out: list[RuntimeSummary] = []
    looked = 0
    for rid in ids[:size * SCAN_FACTOR]:
        looked += 1
        if seen.sees(store, rid):
            out.append(_summary(store, rid, seen))
        if len(out) >= size:
            break
    return RuntimePage(out, ids[looked - 1] if looked < len(ids) else "")


def _summary(store: Store, rid: str, seen: Visibility) -> RuntimeSummary:
    rec = store.get_runtime(rid) or {}
    census = store.census(rid)
    return RuntimeSummary(runtime_id=rid, created_at=float(rec.get("created_at") or 0.0),
                          handles=census.states, pending=sum(n for n, _ in census.open.values()),
                          keyed=bool(seen.key_of(store, rid)), version=_latest_version(rec))


def _latest_version(rec: JSON) -> int:
    """The runtime's latest registry version (1 for a runtime stored before versions)."""
    meta = rec.get("version")
    return int(meta.get("number") or 1) if isinstance(meta, dict) else 1


# ------------------------------------------------------------------ watching


def read_open(store: Store, runtime_ids: set[str] | None,
              known: Known) -> dict[SuspensionKey, OpenSuspension]:
    """Every open suspension (of ``runtime_ids``; None: all) with its item and key."""
    if runtime_ids is None:
        return _read_open(store, None, known)
    return {k: v for rid in runtime_ids for k, v in _read_open(store, rid, known).items()}


def _read_open(store: Store, runtime_id: str | None, known: Known,
               again: int = 2) -> dict[SuspensionKey, OpenSuspension]:
    """Every open suspension (of one runtime); items already ``known`` are not re-read, a new one is
    read with its runtime's key as the runtime record holds it now."""
    out: dict[SuspensionKey, OpenSuspension] = {}
    runtimes: dict[str, tuple[str, object] | None] = {}  # incarnations met by new items
    after: PendingRow | None = None
    while True:
        rows = store.pending(PendingQuery(runtime_id=runtime_id, after=after, limit=WATCH_PAGE))
        for row in rows:
            key = (row.runtime_id, row.handle_id, row.since)
            seen = known.get(row.runtime_id, {}).get(key) or _new_item(store, row, runtimes)
            if seen is not None:
                out[key] = seen
        if len(rows) < WATCH_PAGE:
            break
        after = rows[-1]
    # a runtime purged and created again while it was read may have lent one incarnation's key
    # to the other's handle records: read it again (or leave its new items to the next change)
    for rid, before in runtimes.items():
        if before is not None and _incarnation(store, rid) != before:
            fresh = {k: v for k, v in out.items() if k[0] != rid or k in known.get(rid, {})}
            if again:
                fresh.update(_read_open(store, rid, known, again - 1))
            out = fresh
    return out


def _new_item(store: Store, row: PendingRow,
              runtimes: dict[str, tuple[str, object] | None]) -> OpenSuspension | None:
    if row.runtime_id not in runtimes:  # the runtime before its handle records
        runtimes[row.runtime_id] = _incarnation(store, row.runtime_id)
    incarnation = runtimes[row.runtime_id]
    item = pending_item(store, row) if incarnation is not None else None
    return OpenSuspension(item, incarnation[0]) if item is not None and incarnation is not None else None


def _incarnation(store: Store, runtime_id: str) -> tuple[str, object] | None:
    """The runtime's key digest and creation time (None: no such runtime, purged)."""
    rec = store.get_runtime(runtime_id)
    return None if rec is None else (str(rec.get("key_digest") or ""), rec.get("created_at"))


def removal_reason(store: Store, item: PendingItem) -> str:
    """Why a suspension left the index: ``closed`` (its handle closed or gone), ``cancelled``,
    ``expired`` (declined for its deadline) or ``answered``."""
    rec = store.get_handle(item.runtime_id, item.handle)
    if rec is None or rec.get("state") == "closed":
        return "closed"
    entry = store.get_request(item.runtime_id, item.request.id) or {}
    wait = dict(entry.get("handles") or {}).get(item.handle) or {}
    if wait.get("state") == "cancelled":
        return "cancelled"
    answer = wait.get("answer") or {}
    return "expired" if answer.get("reason") == "expired" else "answered"
