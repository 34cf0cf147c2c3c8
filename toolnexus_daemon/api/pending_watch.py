"""WatchPending's source: one hub per daemon that turns committed changes into ADDED / REMOVED.

The hub keeps, while anybody watches, the set of open suspensions as the
store's pending index holds them, keyed by (runtime, leaf handle, since). It
learns that a runtime changed from the engine's committed events (``observe``,
called after every commit of a runtime this daemon runs: pending, resumed,
closed, any transition), re-reads that runtime's index rows on its own task
and diffs them against the set: a new row is ADDED, a row gone is REMOVED with
the reason read from the store (the handle closed → ``closed``; its wait in
the request index answered → ``answered``, or ``expired`` when the answer's
reason is ``expired``; cancelled → ``cancelled``).

Each suspension is kept with the key digest its runtime had when the hub first
read it, read from the runtime record then and never cached per runtime id: a
runtime purged and created again under another key is a new set of rows, so
its suspensions are shown only to holders of the new key, and the old ones
(with their REMOVED) only to holders of the old key — who saw them ADDED.

In a cluster, runtimes owned by other daemons commit elsewhere, so the hub
also re-reads the whole index every ``CLUSTER_POLL_S`` (0.5 s) and diffs it.
Polling the shared index was chosen over PostgreSQL LISTEN/NOTIFY: it needs
no trigger in the schema, no extra connection held per daemon, survives a
reconnect without missing notifications (a diff cannot miss a change, only
merge a short-lived one), and costs nothing when nobody watches; it costs one
read of the open suspensions per tick while somebody does.

A new watcher gets the set as it stands (ADDED each, oldest first), then
SYNCED, then changes. Each watcher has a backlog bounded by count and by bytes:
one that falls ``WATCH_BACKLOG`` changes or ``WATCH_BACKLOG_BYTES`` behind is
ended with RESOURCE_EXHAUSTED instead of holding memory for it, and its
reconnect starts over with the full list.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import time
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass, field

from ..errors import ResourceExhausted, StoreError, Unavailable
from ..model import Event, EventType
from ..store.base import PendingQuery, PendingRow, Store
from . import pending
from ._gen import runtime_pb2 as pb

log = logging.getLogger("toolnexus_daemon.api")

CLUSTER_POLL_S = 0.5
WATCH_BACKLOG = 10_000
WATCH_BACKLOG_BYTES = 8 << 20  # a change carries a prompt and data of up to hundreds of KB
_READ_PAGE = 1000
_CHANGING = {EventType.PENDING, EventType.RESUMED, EventType.CLOSED, EventType.TRANSITION}

Key = tuple[str, str, float]  # runtime id, leaf handle, since


@dataclass(frozen=True)
class Seen:
    """An open suspension and the key digest of its runtime when it was read ("" = unprotected)."""

    item: pb.PendingItem
    key: str


@dataclass(eq=False)
class Watcher:
    """One WatchPending stream: its filter and its bounded backlog of changes."""

    runtime_id: str
    kind: str
    presented: str
    backlog: deque[pb.PendingChange] = field(default_factory=deque)
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    ended: str = ""  # why the hub ended it ("" while it runs)
    overflowed: bool = False
    backlog_bytes: int = 0

    def wants(self, seen: Seen) -> bool:
        item = seen.item
        if self.runtime_id and item.runtime_id != self.runtime_id:
            return False
        if self.kind and item.request.kind != self.kind:
            return False
        return not seen.key or hmac.compare_digest(seen.key, pending.digest(self.presented))

    def offer(self, change: pb.PendingChange) -> None:
        size = change.ByteSize()
        if len(self.backlog) >= WATCH_BACKLOG or (self.backlog and
                                                  self.backlog_bytes + size > WATCH_BACKLOG_BYTES):
            self.overflowed = True
        else:
            self.backlog.append(change)
            self.backlog_bytes += size
        self.ready.set()

    async def changes(self) -> AsyncIterator[pb.PendingChange]:
        while True:
            await self.ready.wait()
            self.ready.clear()
            if self.overflowed:
                raise ResourceExhausted(f"this watcher fell more than {WATCH_BACKLOG} changes or "
                                        f"{WATCH_BACKLOG_BYTES >> 20} MB behind; WatchPending again "
                                        "(it starts over with the full list)")
            while self.backlog:
                change = self.backlog.popleft()
                self.backlog_bytes -= change.ByteSize()
                yield change
            if self.ended:
                raise Unavailable(self.ended)


class PendingHub:
    """The set of open suspensions and its watchers (see the module docstring)."""

    def __init__(self, store: Store, *, poll_s: float | None = None) -> None:
        self._store, self._poll_s = store, poll_s
        self._known: dict[str, dict[Key, Seen]] = {}
        self._watchers: set[Watcher] = set()
        self._dirty: set[str] = set()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()
        self._closed = ""
        self._loading = False

    def observe(self, runtime_id: str, events: list[Event]) -> None:
        """Committed events of a runtime (under its commit lock: only marks it to be re-read)."""
        if (self._task is not None or self._loading) and any(e.type in _CHANGING for e in events):
            self._dirty.add(runtime_id)
            self._wake.set()

    async def subscribe(self, runtime_id: str, kind: str,
                        presented: str) -> tuple[list[pb.PendingItem], Watcher]:
        """A new watcher and the open suspensions it may see, oldest first."""
        if self._closed:
            raise Unavailable(self._closed)
        async with self._lock:
            if self._task is None:
                # changes committed while the set loads mark their runtime, to be read again after
                self._known, self._loading = {}, True
                try:
                    for key, seen in (await asyncio.to_thread(self._read, None)).items():
                        self._known.setdefault(key[0], {})[key] = seen
                finally:
                    self._loading = False
                self._task = asyncio.create_task(self._run(), name="pending-hub")
                self._wake.set()
            w = Watcher(runtime_id, kind, presented)
            self._watchers.add(w)
            items = [s.item for rows in self._known.values() for s in rows.values() if w.wants(s)]
        items.sort(key=lambda i: (i.created_at, i.runtime_id, i.handle))
        return items, w

    def unsubscribe(self, w: Watcher) -> None:
        self._watchers.discard(w)
        if not self._watchers and self._task is not None:
            self._task.cancel()  # nobody watches: stop reading, forget the set
            self._task = None
            self._known, self._dirty = {}, set()

    def close(self, why: str) -> None:
        """End every watcher (the daemon shuts down) with ``why``."""
        self._closed = why
        for w in list(self._watchers):
            w.ended = why
            w.ready.set()

    # ------------------------------------------------------------------ the hub's task

    async def _run(self) -> None:
        last_full = time.monotonic()
        while True:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self._poll_s)
            self._wake.clear()
            dirty, self._dirty = self._dirty, set()
            full = self._poll_s is not None and time.monotonic() - last_full >= self._poll_s
            try:
                async with self._lock:
                    await self._refresh(None if full else dirty)
            except StoreError as exc:  # the store is down: try again on the next change or tick
                log.warning("pending watch could not read the store", extra={"error": str(exc)})
                self._dirty |= dirty
                await asyncio.sleep(self._poll_s or CLUSTER_POLL_S)
                continue
            if full:
                last_full = time.monotonic()

    async def _refresh(self, runtimes: set[str] | None) -> None:
        """Re-read the index (of ``runtimes``; None: all), diff it against the set, tell the watchers.
        Under ``_lock``, so a new watcher's list and the changes it gets next never overlap."""
        if runtimes is not None and not runtimes:
            return
        found = await asyncio.to_thread(self._read_scope, runtimes)
        removed, added = self._diff(runtimes, found)
        reasons = await asyncio.to_thread(lambda: [self._reason(s.item) for s in removed])
        for seen, reason in zip(removed, reasons, strict=True):
            self._publish(pb.PendingChange(type="REMOVED", item=seen.item, reason=reason), seen.key)
        for seen in added:
            self._publish(pb.PendingChange(type="ADDED", item=seen.item), seen.key)

    def _diff(self, runtimes: set[str] | None, found: dict[Key, Seen]) -> tuple[list[Seen], list[Seen]]:
        scope = set(runtimes) if runtimes is not None else set(self._known) | {k[0] for k in found}
        removed: list[Seen] = []
        added: list[Seen] = []
        for rid in sorted(scope):
            before = self._known.pop(rid, {})
            after = {k: v for k, v in found.items() if k[0] == rid}
            removed.extend(before[k] for k in sorted(set(before) - set(after), key=lambda k: k[2]))
            added.extend(after[k] for k in sorted(set(after) - set(before), key=lambda k: k[2]))
            if after:
                self._known[rid] = after
        return removed, added

    def _publish(self, change: pb.PendingChange, key: str) -> None:
        """``change`` to every watcher that may see an item under ``key`` (the item's own key: a
        REMOVED goes where its ADDED went, never to the holders of a later runtime's key)."""
        seen = Seen(change.item, key)
        for w in list(self._watchers):
            if w.wants(seen):
                w.offer(change)
                if w.overflowed:
                    self._watchers.discard(w)

    # ------------------------------------------------------------------ store reads (worker thread)

    def _read_scope(self, runtimes: set[str] | None) -> dict[Key, Seen]:
        if runtimes is None:
            return self._read(None)
        return {k: v for rid in runtimes for k, v in self._read(rid).items()}

    def _read(self, runtime_id: str | None, again: int = 2) -> dict[Key, Seen]:
        """Every open suspension (of one runtime) with its item and key; items already known are not
        re-read, a new one is read with its runtime's key as the runtime record holds it now."""
        out: dict[Key, Seen] = {}
        runtimes: dict[str, tuple[str, object] | None] = {}  # incarnations met by new items
        after: PendingRow | None = None
        while True:
            rows = self._store.pending(PendingQuery(runtime_id=runtime_id, after=after, limit=_READ_PAGE))
            for row in rows:
                key = (row.runtime_id, row.handle_id, row.since)
                seen = self._known.get(row.runtime_id, {}).get(key) or self._new_item(row, runtimes)
                if seen is not None:
                    out[key] = seen
            if len(rows) < _READ_PAGE:
                break
            after = rows[-1]
        # a runtime purged and created again while it was read may have lent one incarnation's key
        # to the other's handle records: read it again (or leave its new items to the next change)
        for rid, before in runtimes.items():
            if before is not None and self._incarnation(rid) != before:
                fresh = {k: v for k, v in out.items() if k[0] != rid or k in self._known.get(rid, {})}
                if again:
                    fresh.update(self._read(rid, again - 1))
                out = fresh
        return out

    def _new_item(self, row: PendingRow, runtimes: dict[str, tuple[str, object] | None]) -> Seen | None:
        if row.runtime_id not in runtimes:  # the runtime before its handle records
            runtimes[row.runtime_id] = self._incarnation(row.runtime_id)
        incarnation = runtimes[row.runtime_id]
        item = pending.pending_item(self._store, row) if incarnation is not None else None
        return Seen(item, incarnation[0]) if item is not None and incarnation is not None else None

    def _incarnation(self, runtime_id: str) -> tuple[str, object] | None:
        """The runtime's key digest and creation time (None: no such runtime, purged)."""
        rec = self._store.get_runtime(runtime_id)
        return None if rec is None else (str(rec.get("key_digest") or ""), rec.get("created_at"))

    def _reason(self, item: pb.PendingItem) -> str:
        """Why a suspension left the index, from what the store holds now."""
        rec = self._store.get_handle(item.runtime_id, item.handle)
        if rec is None or rec.get("state") == "closed":
            return "closed"
        entry = self._store.get_request(item.runtime_id, item.request.id) or {}
        wait = dict(entry.get("handles") or {}).get(item.handle) or {}
        if wait.get("state") == "cancelled":
            return "cancelled"
        answer = wait.get("answer") or {}
        return "expired" if answer.get("reason") == "expired" else "answered"


async def watch(hub: PendingHub, store: Store, request: pb.WatchPendingRequest,
                presented: str) -> AsyncGenerator[pb.PendingChange, None]:
    """One WatchPending stream: ADDED for each open suspension, SYNCED, then the changes."""
    pending.check_kind(request.kind)
    if request.runtime_id:
        await asyncio.to_thread(pending.Visibility(store, presented).check, request.runtime_id)
    items, watcher = await hub.subscribe(request.runtime_id, request.kind, presented)
    try:
        for item in items:
            yield pb.PendingChange(type="ADDED", item=item)
        yield pb.PendingChange(type="SYNCED")
        async for change in watcher.changes():
            yield change
    finally:
        hub.unsubscribe(watcher)
