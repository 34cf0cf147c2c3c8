"""The daemon's one commit path: every runtime's changes, grouped in shared transactions (protocol.md §5).

Every state change, its checkpoint and its events land in one store
transaction, and a runtime's events are numbered and published in commit
order. There is ONE ``Committer`` per engine, shared by all its runtimes, and it
is the only layer that groups: the changes queued (by any runtime) while a
transaction is being synced go down together as the next transaction — one
fsync for all of them — so concurrent handles, of one runtime or of many, do
not wait for each other's disk round trips. A store with several commit lanes
(PostgreSQL: a connection each) gets a queue per lane, so the transactions of
different lanes overlap. A runtime stays in its lane while any change of it is queued or
in flight (so its changes apply in call order); once all are durable its next change takes
the least-loaded lane — an idle one if there is one, else the shortest queue, where it
joins the next group. Runtimes are spread by how busy the lanes are, not by a hash of
their ids (which left lanes idle while others queued: 16 runtimes on 4 lanes by CRC-32
gave one lane 8 runtimes and another none).
The store then writes exactly the one batch it is given per transaction. Each
caller still returns only once its own change is durable, and a cancelled caller
cannot tear or drop its change.

Each runtime keeps its own side (``RuntimeLog``): its next and first event seq,
the guard its commits pass, and the barrier its readers wait on. Events get
their seqs when their group is written, and a runtime's seqs advance only when
that transaction committed, so they stay gapless. A group the store (or a
guard) refuses is retried change by change: only the offending change fails —
of a lost lease, only the changes of the runtime that lost it — and the handles
it touched are reloaded from the store. A change that would be applied out of
order inside a shared transaction starts the next group instead: a truncation of
a transcript an earlier change of the group appended to, or a purge of a runtime
an earlier change of the group wrote.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from dataclasses import dataclass
from typing import Protocol

from ...clock import Clock, rfc3339
from ...errors import StoreError
from ...model import JSON, Event, RuntimeOptions
from ...store.base import Batch, Store, lane_of
from ..state.answer_links import LINKS_RUNTIME
from ..state.change import Change, EventSpec
from ..state.handle_table import HandleTable

log = logging.getLogger("toolnexus_daemon.engine")

# the most changes one transaction carries (of all runtimes together)
MAX_GROUP = 256
# past the event retention, at most this many events wait for the next (batched) drop
DROP_BATCH_MAX = 1024


class CommitHost(Protocol):
    """What the commit path needs of a runtime (``Runtime`` satisfies it): no verb, no handle walk.

    The committer owns this protocol and sits below the runtime: it reaches the runtime only through
    these members (its record, the publication of committed events, its handle table for the reload
    of a refused change), never by importing a turn or a verb."""

    @property
    def id(self) -> str: ...
    @property
    def options(self) -> RuntimeOptions: ...
    @property
    def clock(self) -> Clock: ...
    @property
    def table(self) -> HandleTable: ...
    def record(self) -> JSON: ...
    def publish(self, events: list[Event]) -> None: ...


class CommitGuard(Protocol):
    """The one place a commit is made conditional: asked for every runtime of every transaction.

    ``check`` gets the runtime id and that runtime's part of the transaction just before the
    store sees it. Raising a ``StoreError`` (or a subclass) refuses it as a store refusal would;
    adding to ``batch.fences`` makes it conditional on a lease the store checks inside the
    transaction (the cluster's ``ownership.LeaseGuard``). ``refused`` hears of every change of
    the runtime refused on its own (the group retried change by change), whatever refused it."""

    def check(self, runtime_id: str, batch: Batch) -> None: ...
    def refused(self, runtime_id: str, error: StoreError) -> None: ...

    def act(self, runtime_id: str) -> None:
        """Asked before every model and tool call of the runtime: raises when this daemon may no
        longer act for it (the cluster's ``ownership.LeaseGuard``: its lease went stale)."""
        ...


class AllowAll:
    """The default ``CommitGuard``: every commit may proceed (one daemon, no leases)."""

    def check(self, runtime_id: str, batch: Batch) -> None:
        return None

    def act(self, runtime_id: str) -> None:
        return None

    def refused(self, runtime_id: str, error: StoreError) -> None:
        return None


def to_batch(runtime_id: str, change: Change, record: JSON | None) -> Batch:
    """Serialise ``change`` into store records, once, when it is made (never a later state).

    ``record`` is the runtime record, given only when the change carries it."""
    batch = Batch()
    rid = runtime_id
    if change.purge:
        batch.purge.append(rid)
    if record is not None:
        batch.runtimes[rid] = record
    for hid, h in change.handles.items():
        batch.handles[(rid, hid)] = h.to_json()
    batch.messages += [(rid, hid, idx, msg) for hid, idx, msg in change.messages]
    batch.truncate += [(rid, hid, idx) for hid, idx in change.truncate]
    for hid, cp in change.checkpoints.items():
        batch.checkpoints[(rid, hid)] = cp.to_json() if cp else None
    for req_id, entry in change.requests.items():
        batch.requests[(rid, req_id)] = entry.to_json()
    for version_key, version in change.versions.items():
        batch.versions[(rid, version_key)] = version
    for link_digest, row in change.links.items():
        batch.requests[(LINKS_RUNTIME, link_digest)] = row
    return batch


@dataclass(frozen=True)
class CommitStats:
    """What the committer did so far: ``changes`` committed in ``transactions`` write transactions,
    ``failed`` changes refused, the ``largest_group`` of changes tried in one transaction, and how
    many changes are ``queued`` right now."""

    changes: int
    transactions: int
    failed: int
    largest_group: int
    queued: int

    @property
    def batches(self) -> int:
        """The metrics' name for ``changes`` (``toolnexus_store_group_commit_batches``)."""
        return self.changes


class RuntimeLog:
    """One runtime's side of the commit path: its event seqs, its guard and its barrier."""

    def __init__(self, host: CommitHost, next_seq: int, first_seq: int, guard: CommitGuard,
                 lane: int = 0) -> None:
        self.host, self.guard, self.lane = host, guard, lane
        self.next_seq = next_seq
        # the oldest seq still stored (event retention drops older ones)
        self.first_seq = first_seq
        self.last: asyncio.Future[None] | None = None

    @property
    def id(self) -> str:
        return self.host.id

    async def barrier(self) -> None:
        """Return once every change of this runtime queued so far is durable (or refused).

        Memory runs a little ahead of disk while a commit is in flight; a reader that
        hands state to a client (Wait) or acts on the index (Resume) waits here first,
        so nothing it reports can be lost by a crash or missing from the store."""
        last = self.last
        if last is not None and not last.done():
            await asyncio.wait([last])

    def part(self, changes: list[Batch], specs: list[EventSpec]) -> tuple[Batch, int]:
        """This runtime's part of a transaction (its changes' records, its events numbered from
        ``next_seq``, a due retention drop, the guard's conditions) and the first seq it keeps."""
        at = rfc3339(self.host.clock.now())
        events = [self._event(self.next_seq + i, spec, at) for i, spec in enumerate(specs)]
        part = Batch(events=events)
        for batch in changes:
            _merge(part, batch)
        keep_from = self._retained_from(len(events))
        if keep_from > self.first_seq + self._drop_slack():
            part.drop_events.append((self.id, keep_from))
        else:
            keep_from = self.first_seq
        self.guard.check(self.id, part)
        return part, keep_from

    @property
    def settled(self) -> bool:
        """Whether every change of this runtime queued so far is durable (or refused)."""
        return self.last is None or self.last.done()

    def resync(self, last_stored: int) -> None:
        """Continue after the store's last seq of this runtime, when it is past ours: a commit that
        failed as the connection broke at COMMIT may have landed after all (its events were never
        published), and its seqs must not be written again. Called only while ``settled``."""
        self.next_seq = max(self.next_seq, last_stored + 1)

    def committed(self, part: Batch, keep_from: int) -> None:
        """``part`` is durable: the next event of this runtime takes the seq after its last."""
        self.next_seq += len(part.events)
        self.first_seq = max(self.first_seq, keep_from)

    def publish(self, events: list[Event]) -> None:
        """Durable events to watchers and the observer. A failure there is logged, never raised: the
        changes are on disk, so their callers (of every runtime in the group) must hear success."""
        try:
            self.host.publish(events)
        except Exception:
            log.exception("committed events could not be published", extra={"runtime": self.id})

    def _event(self, seq: int, e: EventSpec, at: str) -> Event:
        return Event(seq=seq, runtime_id=self.id, handle=e.handle, type=e.type, note=e.note, at=at,
                     from_state=e.from_state, to_state=e.to_state, pending=e.pending, result=e.result,
                     data=e.data)

    def _retained_from(self, adding: int) -> int:
        """The first seq to keep once ``adding`` more events are stored (retention 0 = keep all)."""
        retention = self.host.options.event_retention
        return self.next_seq + adding - retention if retention > 0 else 0

    def _drop_slack(self) -> int:
        """How many events past the retention may wait for the next drop: dropping the oldest
        events rewrites the left edge of the event table, so past a retention of 16 events they
        are dropped in batches (1/16 of the retention, at most 1,024) rather than at every commit."""
        return min(DROP_BATCH_MAX, self.host.options.event_retention // 16)


@dataclass
class _Queued:
    log: RuntimeLog
    change: Change
    # the change's records, serialised when it was made (never a later state of its handles)
    batch: Batch
    done: asyncio.Future[None]


class Committer:
    """Owns the order in which every runtime's changes reach the store, and their grouping.

    A store that can run several commits at once (``Store.commit_lanes``: PostgreSQL's writer
    connections) gets one queue and one drain per lane; a runtime keeps its lane while any of
    its changes is unsettled (``_lane_for``), so its changes stay in call order while other
    lanes' overlap."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._lanes = max(int(getattr(store, "commit_lanes", 1)), 1)
        self._queues: list[deque[_Queued]] = [deque() for _ in range(self._lanes)]
        self._drains: list[asyncio.Task[None] | None] = [None] * self._lanes
        self._writing = [0] * self._lanes  # 1 while the lane's transaction is in flight
        self._counts = [0, 0, 0, 0]  # changes, transactions, failed, largest group

    def open(self, host: CommitHost, next_seq: int, first_seq: int,
             guard: CommitGuard | None = None) -> RuntimeLog:
        """The commit path of one runtime whose next event gets ``next_seq``."""
        return RuntimeLog(host, next_seq, first_seq, guard or AllowAll(), lane_of(host.id, self._lanes))

    async def commit(self, log: RuntimeLog, change: Change) -> None:
        """Queue ``change`` of ``log``'s runtime behind every change queued before; return once it is
        durable. A cancelled caller cannot tear or drop it: the write goes on without the caller."""
        await asyncio.shield(self.submit(log, change))

    def submit(self, log: RuntimeLog, change: Change) -> asyncio.Future[None]:
        """Queue ``change`` now, behind every change queued before; the future resolves once it is
        durable (or fails with the store's refusal). Nothing is awaited, so the order of calls is
        the order of commits."""
        host = log.host
        try:
            host.table.settle_restores()  # memory must not run ahead of a store that refused a change
        except StoreError:
            # refused before it was queued: its handles, already changed in memory, are reloaded
            # from the store with the others once it can be read again
            host.table.restore(change.handles)
            raise
        batch = to_batch(host.id, change, host.record() if change.runtime else None)
        item = _Queued(log, change, batch, asyncio.get_running_loop().create_future())
        # a caller stopped before it awaited (a turn given up) leaves no unretrieved refusal behind
        item.done.add_done_callback(_retrieve)
        lane = log.lane = self._lane_for(log)
        self._queues[lane].append(item)
        log.last = item.done
        drain = self._drains[lane]
        if drain is None or drain.done():
            self._drains[lane] = asyncio.create_task(self._run(lane), name=f"commits-{lane}")
        return item.done

    def _lane_for(self, log: RuntimeLog) -> int:
        """The lane of ``log``'s next change: its current one while any change of it is queued or in
        flight (a lane applies in call order; two lanes may land in either order), else the
        least-loaded lane (queued changes plus one for a transaction in flight), its own on a tie.
        A runtime changes lanes only once everything it committed before is durable, so its
        transactions stay ordered and each still carries its fences (``RuntimeLog.part``)."""
        if self._lanes == 1 or not log.settled:
            return log.lane
        loads = [len(queue) + writing for queue, writing in zip(self._queues, self._writing, strict=True)]
        return min(range(self._lanes), key=lambda lane: (loads[lane], lane != log.lane))

    def stats(self) -> CommitStats:
        changes, txns, failed, largest = self._counts
        return CommitStats(changes=changes, transactions=txns, failed=failed, largest_group=largest,
                           queued=sum(len(q) for q in self._queues))

    async def _run(self, lane: int) -> None:
        queue = self._queues[lane]
        while queue:
            group = self._take_group(queue)
            self._counts[3] = max(self._counts[3], len(group))
            self._writing[lane] = 1
            try:
                await self._write(group, lane)
            except StoreError:
                for item in group:  # one by one: only the offending change fails
                    await self._write_alone(item, lane)
            except Exception as exc:  # a bug: never leave a caller waiting forever
                for item in group:
                    self._fail(item, StoreError(f"commit failed: {exc!r}"), exc)
            finally:
                self._writing[lane] = 0

    @staticmethod
    def _take_group(queue: deque[_Queued]) -> list[_Queued]:
        group = [queue.popleft()]
        if not queue:  # a lone change: nothing to order
            return group
        order = _GroupOrder(group[0])
        while queue and len(group) < MAX_GROUP and order.admits(queue[0]):
            group.append(queue.popleft())
        return group

    async def _write_alone(self, item: _Queued, lane: int) -> None:
        try:
            await self._write([item], lane)
        except StoreError as exc:
            self._fail(item, exc, exc)
        except Exception as exc:
            self._fail(item, StoreError(f"commit failed: {exc!r}"), exc)

    def _fail(self, item: _Queued, error: StoreError, raised: Exception) -> None:
        """Refuse ``item``: its handles reloaded from the store, its guard told, its caller raised to.
        Nothing here may stop the drain: the changes queued behind it still wait for their turn."""
        self._counts[2] += 1
        _hold(item, committed=False)
        try:
            item.log.host.table.restore(item.change.handles)
        except Exception:
            log.exception("a refused change's handles could not be reloaded", extra={"runtime": item.log.id})
        try:
            item.log.guard.refused(item.log.id, error)
        except Exception:
            log.exception("the commit guard failed on a refusal", extra={"runtime": item.log.id})
        if not item.done.done():
            item.done.set_exception(raised)

    async def _write(self, group: list[_Queued], lane: int) -> None:
        """One transaction for ``group``; events numbered, published and callers released in order."""
        by_log: dict[RuntimeLog, list[_Queued]] = {}
        for item in group:
            by_log.setdefault(item.log, []).append(item)
        parts = []
        for rt_log, items in by_log.items():
            specs = [e for i in items for e in i.change.events]
            part, keep_from = rt_log.part([i.batch for i in items], specs)
            parts.append((rt_log, part, keep_from))
        if len(parts) == 1:
            batch = parts[0][1]
        else:
            batch = Batch()
            for _, part, _ in parts:
                _merge(batch, part)
        if self._lanes == 1:
            await self._store.commit(batch)
        else:
            await self._store.commit(batch, lane)
        self._counts[0] += len(group)
        self._counts[1] += 1
        for rt_log, part, keep_from in parts:  # every runtime's seqs first: none may be reused
            rt_log.committed(part, keep_from)
        for item in group:  # in commit order: what the owner holds follows the store
            _hold(item, committed=True)
        for rt_log, part, _ in parts:
            rt_log.publish(part.events)
        for item in group:
            if not item.done.done():
                item.done.set_result(None)


class _GroupOrder:
    """What a shared transaction cannot reorder: a transaction applies every purge, then every
    truncation, before any message, so a change that truncates a transcript an earlier change of
    the group appended to, or purges a runtime an earlier change wrote, must start the next group."""

    def __init__(self, first: _Queued) -> None:
        self._logs: set[RuntimeLog] = set()
        self._appended: set[tuple[RuntimeLog, str]] = set()
        self._add(first)

    def admits(self, item: _Queued) -> bool:
        change = item.change
        if change.purge and item.log in self._logs:
            return False
        if any((item.log, hid) in self._appended for hid, _ in change.truncate):
            return False
        self._add(item)
        return True

    def _add(self, item: _Queued) -> None:
        self._logs.add(item.log)
        self._appended.update((item.log, hid) for hid, _, _ in item.change.messages)


def _hold(item: _Queued, committed: bool) -> None:
    """Tell the runtime's held records (``state.held``) that ``item`` is durable, or refused. They
    must never run ahead of the store: if applying fails, everything held is forgotten."""
    held = item.log.host.table.held
    try:
        if committed:
            held.committed(item.batch)
        else:
            held.refused(item.batch)
    except Exception:
        log.exception("held records could not follow a commit; forgotten", extra={"runtime": item.log.id})
        held.clear()


def _merge(into: Batch, later: Batch) -> None:
    """Fold ``later`` into ``into``: its records win, its messages, truncations and events follow."""
    into.purge += later.purge
    into.runtimes.update(later.runtimes)
    into.handles.update(later.handles)
    into.truncate += later.truncate
    into.messages += later.messages
    into.checkpoints.update(later.checkpoints)
    into.requests.update(later.requests)
    into.versions.update(later.versions)
    into.events += later.events
    into.drop_events += later.drop_events
    into.fences += later.fences


def _retrieve(future: asyncio.Future[None]) -> None:
    if not future.cancelled():
        future.exception()
