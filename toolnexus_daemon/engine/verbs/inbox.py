"""The pending inbox and the runtime list, read from the store's indexes: what ``ListPending``,
``ListRuntimes``, ``WatchPending`` and the inspector show.

These read the store, never the loaded runtimes, so in a cluster any daemon answers for every
runtime of the shared database. Every read here is a synchronous function of the store run inside
``Store.read`` (the ``Inbox`` methods): on PostgreSQL on a reader thread, so the event loop waits
on no round trip; LMDB and memory read inline, so a read of many rows is made in hops of at most
``HOP_ROWS`` index rows, the loop serving calls between them. Values returned are domain values
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

from ...errors import NotFound, PermissionDenied, StoreError
from ...model import JSON, ROOT_ID, Request
from ...store.base import HandleKey, PendingQuery, PendingRow, Store

# one call looks at most at this many rows per item of its page (hidden runtimes are skipped)
SCAN_FACTOR = 10
# index rows one ``Store.read`` looks at (with their handle records): LMDB and memory read inline on
# the event loop, about 45 µs a row with its record, so a hop holds the loop for about 10 ms at most
# and a large page or a whole watch list is read in several, the loop serving calls in between
HOP_ROWS = 250

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
    """The reads above, made through ``Store.read`` of ``store`` (off the event loop on PostgreSQL):
    one for a page of runtimes or a key check, one per ``HOP_ROWS`` index rows for the inbox."""

    def __init__(self, store: Store) -> None:
        self._store = store

    async def pending(self, query: PendingQuery, holds: Holds) -> PendingPage:
        scan = PendingScan(query, Visibility(holds))
        while scan.page is None:
            await self._store.read(functools.partial(scan_pending, scan=scan))
        return scan.page

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
        """Every open suspension (of ``runtime_ids``; None: all) with its item and the key its
        runtime has now; those in ``known`` are not read again."""
        if runtime_ids is None:
            return await self._open_of(None, known)
        out: dict[SuspensionKey, OpenSuspension] = {}
        for rid in runtime_ids:
            out.update(await self._open_of(rid, known))
        return out

    async def _open_of(self, runtime_id: str | None, known: Known,
                       again: int = 2) -> dict[SuspensionKey, OpenSuspension]:
        """The open suspensions (of one runtime), ``HOP_ROWS`` index rows a ``Store.read``."""
        scan = OpenScan(runtime_id, known)
        while not scan.done:
            await self._store.read(functools.partial(scan_open, scan=scan))
        # a runtime purged and created again while it was read may have lent one incarnation's key
        # to the other's handle records: read it again (or leave its new items to the next change)
        out = scan.found
        for rid in scan.moved:
            fresh = {k: v for k, v in out.items() if k[0] != rid or k in known.get(rid, {})}
            if again:
                fresh.update(await self._open_of(rid, known, again - 1))
            out = fresh
        return out

    async def why_removed(self, items: list[PendingItem]) -> list[str]:
        """Why each suspension left the index, from what the store holds now."""
        return await self._store.read(lambda store: [removal_reason(store, item) for item in items])


def _nobody(_key: str) -> bool:
    return False


# ------------------------------------------------------------------ the inbox (inside Store.read)


@dataclass
class PendingScan:
    """A page of the inbox being read, ``HOP_ROWS`` index rows at a time (``scan_pending``)."""

    query: PendingQuery
    seen: Visibility
    items: list[PendingItem] = field(default_factory=list)
    last: PendingRow | None = None
    budget: int = 0
    started: bool = False
    page: PendingPage | None = None  # set once the page is read

    def __post_init__(self) -> None:
        self.last, self.budget = self.query.after, self.query.limit * SCAN_FACTOR


def list_pending(store: Store, query: PendingQuery, seen: Visibility) -> PendingPage:
    """One page, read in one go (``Inbox.pending`` reads it a ``Store.read`` a hop)."""
    scan = PendingScan(query, seen)
    while scan.page is None:
        scan_pending(store, scan)
    return scan.page


def scan_pending(store: Store, scan: PendingScan) -> None:
    """One hop of a page: rows in index order, those of runtimes the caller may not see skipped; a
    runtime filter naming an unknown runtime is NOT_FOUND, one whose key was not presented
    PERMISSION_DENIED. Sets ``scan.page`` once the page is full, the index holds no more, or
    enough rows were looked at for one call (the page then goes on from the last)."""
    query = scan.query
    if not scan.started:
        scan.started = True
        if query.runtime_id is not None:
            scan.seen.check(store, query.runtime_id)
    if scan.budget <= 0:
        scan.page = PendingPage(scan.items, scan.last)
        return
    ask = min(scan.budget, query.limit, HOP_ROWS)
    rows = store.pending(replace(query, after=scan.last, limit=ask))
    scan.budget -= len(rows)
    visible = [row for row in rows if scan.seen.sees(store, row.runtime_id)]
    records = dict(zip(visible, _records(store, [(r.runtime_id, r.handle_id) for r in visible]), strict=True))
    for row in rows:
        scan.last = row
        item = item_of_record(row, records[row]) if row in records else None
        if item is not None:
            scan.items.append(item)
        if len(scan.items) >= query.limit:
            scan.page = PendingPage(scan.items, row)
            return
    if len(rows) < ask:
        scan.page = PendingPage(scan.items)  # the index holds no more
    elif scan.budget <= 0:
        scan.page = PendingPage(scan.items, scan.last)  # looked at enough rows for one call


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


@dataclass
class OpenScan:
    """The open suspensions (of one runtime, or all) being read, ``HOP_ROWS`` rows at a time."""

    runtime_id: str | None
    known: Known
    found: dict[SuspensionKey, OpenSuspension] = field(default_factory=dict)
    # the incarnation (key digest, creation time) of each runtime new items were read under
    incarnations: dict[str, tuple[str, object] | None] = field(default_factory=dict)
    after: PendingRow | None = None
    done: bool = False
    # once done: the runtimes among ``incarnations`` purged and created again while they were read
    moved: list[str] = field(default_factory=list)


def scan_open(store: Store, scan: OpenScan) -> None:
    """One hop: items already known are kept, new ones read (their records in one read) with their
    runtime's key as the runtime record holds it now."""
    rows = store.pending(PendingQuery(runtime_id=scan.runtime_id, after=scan.after, limit=HOP_ROWS))
    new: list[PendingRow] = []
    for row in rows:
        key = (row.runtime_id, row.handle_id, row.since)
        seen = scan.known.get(row.runtime_id, {}).get(key)
        if seen is not None:
            scan.found[key] = seen
            continue
        if row.runtime_id not in scan.incarnations:  # the runtime before its handle records
            scan.incarnations[row.runtime_id] = _incarnation(store, row.runtime_id)
        if scan.incarnations[row.runtime_id] is not None:
            new.append(row)
    for row, rec in zip(new, _records(store, [(r.runtime_id, r.handle_id) for r in new]), strict=True):
        item, incarnation = item_of_record(row, rec), scan.incarnations[row.runtime_id]
        if item is not None and incarnation is not None:
            scan.found[(row.runtime_id, row.handle_id, row.since)] = OpenSuspension(item, incarnation[0])
    scan.after = rows[-1] if rows else scan.after
    scan.done = len(rows) < HOP_ROWS
    if scan.done:  # in the last hop: no read of its own
        scan.moved = [rid for rid, before in scan.incarnations.items()
                      if before is not None and _incarnation(store, rid) != before]


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
