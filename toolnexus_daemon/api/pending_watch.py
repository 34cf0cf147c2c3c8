"""WatchPending's source: one hub per daemon that turns committed changes into ADDED / REMOVED.

The hub keeps, while anybody watches, the set of open suspensions as the
store's pending index holds them, keyed by (runtime, leaf handle, since). It
learns that a runtime changed from the engine's committed events (``observe``,
called after every commit of a runtime this daemon runs: pending, resumed,
closed, any transition), has the engine re-read that runtime's index rows
(``engine.verbs.inbox``, off the event loop) on its own task and diffs them
against the set: a new row is ADDED, a row gone is REMOVED with the reason the
engine reads from the store (the handle closed → ``closed``; its wait in the
request index answered → ``answered``, or ``expired`` when the answer's reason
is ``expired``; cancelled → ``cancelled``).

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
ended with RESOURCE_EXHAUSTED instead of holding memory for it (``FellBehind``,
which the servicer marks with the ``x-toolnexus-relist`` trailer so that a client can
tell it from a refusal), and its reconnect starts over with the full list.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass, field

from ..engine.verbs.inbox import Inbox, OpenSuspension, PendingItem, SuspensionKey, presented
from ..errors import ResourceExhausted, StoreError, Unavailable
from ..model import Event, EventType
from . import pending
from ._gen import runtime_pb2 as pb

log = logging.getLogger("toolnexus_daemon.api")

CLUSTER_POLL_S = 0.5
WATCH_BACKLOG = 10_000
WATCH_BACKLOG_BYTES = 8 << 20  # a change carries a prompt and data of up to hundreds of KB
# the trailer of a WatchPending ended for falling behind: open it again, from the full list
RELIST_HEADER = "x-toolnexus-relist"
_CHANGING = {EventType.PENDING, EventType.RESUMED, EventType.CLOSED, EventType.TRANSITION}


class FellBehind(ResourceExhausted):
    """A watcher whose backlog overflowed: it starts over with the full list (a list-watch has no
    position to resume from)."""


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

    def __post_init__(self) -> None:
        self._holds = presented(self.presented)

    def wants(self, seen: OpenSuspension) -> bool:
        item = seen.item
        if self.runtime_id and item.runtime_id != self.runtime_id:
            return False
        if self.kind and item.request.kind != self.kind:
            return False
        return not seen.key or self._holds(seen.key)

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
                raise FellBehind(f"this watcher fell more than {WATCH_BACKLOG} changes or "
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

    def __init__(self, inbox: Inbox, *, poll_s: float | None = None) -> None:
        self._inbox, self._poll_s = inbox, poll_s
        self._known: dict[str, dict[SuspensionKey, OpenSuspension]] = {}
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
                        presented: str) -> tuple[list[PendingItem], Watcher]:
        """A new watcher and the open suspensions it may see, oldest first."""
        if self._closed:
            raise Unavailable(self._closed)
        async with self._lock:
            if self._task is None:
                # changes committed while the set loads mark their runtime, to be read again after
                self._known, self._loading = {}, True
                try:
                    for key, seen in (await self._inbox.open_suspensions(None, {})).items():
                        self._known.setdefault(key[0], {})[key] = seen
                finally:
                    self._loading = False
                self._task = asyncio.create_task(self._run(), name="pending-hub")
                self._wake.set()
            w = Watcher(runtime_id, kind, presented)
            self._watchers.add(w)
            items = [s.item for rows in self._known.values() for s in rows.values() if w.wants(s)]
        items.sort(key=lambda i: (i.since, i.runtime_id, i.handle))
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
        found = await self._inbox.open_suspensions(runtimes, self._known)
        removed, added = self._diff(runtimes, found)
        reasons = await self._inbox.why_removed([s.item for s in removed]) if removed else []
        for seen, reason in zip(removed, reasons, strict=True):
            self._publish("REMOVED", seen, reason)
        for seen in added:
            self._publish("ADDED", seen)

    def _diff(self, runtimes: set[str] | None, found: dict[SuspensionKey, OpenSuspension]
              ) -> tuple[list[OpenSuspension], list[OpenSuspension]]:
        scope = set(runtimes) if runtimes is not None else set(self._known) | {k[0] for k in found}
        removed: list[OpenSuspension] = []
        added: list[OpenSuspension] = []
        for rid in sorted(scope):
            before = self._known.pop(rid, {})
            after = {k: v for k, v in found.items() if k[0] == rid}
            removed.extend(before[k] for k in sorted(set(before) - set(after), key=lambda k: k[2]))
            added.extend(after[k] for k in sorted(set(after) - set(before), key=lambda k: k[2]))
            if after:
                self._known[rid] = after
        return removed, added

    def _publish(self, kind: str, seen: OpenSuspension, reason: str = "") -> None:
        """A change of ``seen`` to every watcher that may see it under its own key (a REMOVED goes
        where its ADDED went, never to the holders of a later runtime's key); converted once."""
        change: pb.PendingChange | None = None
        for w in list(self._watchers):
            if w.wants(seen):
                change = change or pb.PendingChange(type=kind, item=pending.item_to(seen.item), reason=reason)
                w.offer(change)
                if w.overflowed:
                    self._watchers.discard(w)


async def watch(hub: PendingHub, inbox: Inbox, request: pb.WatchPendingRequest,
                key: str) -> AsyncGenerator[pb.PendingChange, None]:
    """One WatchPending stream: ADDED for each open suspension, SYNCED, then the changes."""
    pending.check_kind(request.kind)
    if request.runtime_id:
        await inbox.check(request.runtime_id, presented(key))
    items, watcher = await hub.subscribe(request.runtime_id, request.kind, key)
    try:
        for item in items:
            yield pb.PendingChange(type="ADDED", item=pending.item_to(item))
        yield pb.PendingChange(type="SYNCED")
        async for change in watcher.changes():
            yield change
    finally:
        hub.unsubscribe(watcher)
