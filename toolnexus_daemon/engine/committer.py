"""The commits of one runtime: in order, gapless seqs, grouped while the disk is busy (docs/protocol.md §5).

Every state change, its checkpoint and its events land in one store
transaction, and events are numbered and published in commit order. Changes
that arrive while a commit is being synced queue up and go down together as
the next transaction — one fsync for all of them — so concurrent handles of
one runtime do not wait for each other's disk round trips. Each caller still
returns only once its own change is durable. A group the store refuses is
retried change by change, so one bad change fails alone and the seqs stay
gapless; a change that truncates a transcript starts a group of its own, so
it is never applied before messages an earlier change appended.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Protocol

from ..clock import rfc3339
from ..errors import StoreError
from ..model import JSON, Event, RuntimeOptions
from ..store.base import Batch
from .change import Change, EventSpec
from .context import Deps
from .handles import HandleTable
from .links import LINKS_RUNTIME

# the most changes one transaction carries
MAX_GROUP = 256
# past the event retention, at most this many events wait for the next (batched) drop
DROP_BATCH_MAX = 1024


class CommitHost(Protocol):
    """What the committer needs of its runtime (``Runtime`` satisfies it): no verb, no handle table."""

    @property
    def id(self) -> str: ...
    @property
    def options(self) -> RuntimeOptions: ...
    @property
    def deps(self) -> Deps: ...
    @property
    def table(self) -> HandleTable: ...
    def record(self) -> JSON: ...
    def publish(self, events: list[Event]) -> None: ...


class CommitGuard(Protocol):
    """The one place a commit may be refused before it reaches the store.

    Called with the runtime id and the batch just before every store transaction; raising a
    ``StoreError`` (or a subclass) fails the group like a store refusal would. The cluster
    work hooks its lease check here; today the default allows every commit."""

    def check(self, runtime_id: str, batch: Batch) -> None: ...


class AllowAll:
    """The default ``CommitGuard``: every commit may proceed."""

    def check(self, runtime_id: str, batch: Batch) -> None:
        return None


def to_batch(runtime_id: str, change: Change, record: JSON | None) -> Batch:
    """Serialise ``change`` into store records, once, when it is made (never a later state).

    ``record`` is the runtime record, given only when the change carries it."""
    batch = Batch()
    rid = runtime_id
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
    for link_digest, row in change.links.items():
        batch.requests[(LINKS_RUNTIME, link_digest)] = row
    return batch


@dataclass
class _Queued:
    change: Change
    # the change's records, serialised when it was made (never a later state of its handles)
    batch: Batch
    done: asyncio.Future[None]


class Committer:
    """Owns the event sequence of a runtime and the order its changes reach the store."""

    def __init__(self, rt: CommitHost, next_seq: int, first_seq: int,
                 guard: CommitGuard | None = None) -> None:
        self._rt = rt
        self._guard: CommitGuard = guard or AllowAll()
        self.next_seq = next_seq
        # the oldest seq still stored (event retention drops older ones)
        self.first_seq = first_seq
        self._queue: list[_Queued] = []
        self._drain: asyncio.Task[None] | None = None
        self._last: asyncio.Future[None] | None = None

    async def commit(self, change: Change) -> None:
        """Return once ``change`` is durable; a cancelled caller cannot tear or drop it."""
        await asyncio.shield(self.submit(change))

    def submit(self, change: Change) -> asyncio.Future[None]:
        """Queue ``change`` now, behind every change queued before; the future resolves once it is
        durable (or fails with the store's refusal). Nothing is awaited, so the order of calls is
        the order of commits."""
        self._rt.table.settle_restores()  # memory must not run ahead of a store that refused a change
        batch = to_batch(self._rt.id, change, self._rt.record() if change.runtime else None)
        item = _Queued(change, batch, asyncio.get_running_loop().create_future())
        self._queue.append(item)
        self._last = item.done
        if self._drain is None or self._drain.done():
            self._drain = asyncio.create_task(self._run(), name=f"commits {self._rt.id}")
        return item.done

    async def barrier(self) -> None:
        """Return once every change queued so far is durable (or refused).

        Memory runs a little ahead of disk while a commit is in flight; a reader that
        hands state to a client (Wait) or acts on the index (Resume) waits here first,
        so nothing it reports can be lost by a crash or missing from the store."""
        last = self._last
        if last is not None and not last.done():
            await asyncio.wait([last])

    async def _run(self) -> None:
        while self._queue:
            group = self._take_group()
            try:
                await self._write(group)
            except StoreError:
                for item in group:  # one by one: only the offending change fails
                    await self._write_alone(item)
            except Exception as exc:  # a bug: never leave a caller waiting forever
                for item in group:
                    self._fail(item, exc)

    def _take_group(self) -> list[_Queued]:
        group = [self._queue.pop(0)]
        while self._queue and len(group) < MAX_GROUP and not self._queue[0].change.truncate:
            group.append(self._queue.pop(0))
        return group

    async def _write_alone(self, item: _Queued) -> None:
        try:
            await self._write([item])
        except StoreError as exc:
            self._fail(item, exc)

    def _fail(self, item: _Queued, exc: Exception) -> None:
        try:
            self._rt.table.restore(item.change.handles)
        finally:  # whatever restoring does, the caller hears of its refused change
            if not item.done.done():
                item.done.set_exception(exc)

    async def _write(self, group: list[_Queued]) -> None:
        """One transaction for ``group``; events numbered, published and callers released in order."""
        now = rfc3339(self._rt.deps.clock.now())
        events = [self._event(self.next_seq + i, spec, now)
                  for i, spec in enumerate(e for item in group for e in item.change.events)]
        batch = Batch(events=events)
        for item in group:
            _merge(batch, item.batch)
        keep_from = self._retained_from(len(events))
        if keep_from > self.first_seq + self._drop_slack():
            batch.drop_events.append((self._rt.id, keep_from))
        else:
            keep_from = self.first_seq
        self._guard.check(self._rt.id, batch)
        await self._rt.deps.store.commit(batch)
        self.next_seq += len(events)
        self.first_seq = max(self.first_seq, keep_from)
        self._publish(events)
        for item in group:
            if not item.done.done():
                item.done.set_result(None)

    def _event(self, seq: int, e: EventSpec, at: str) -> Event:
        return Event(seq=seq, runtime_id=self._rt.id, handle=e.handle, type=e.type, note=e.note, at=at,
                     from_state=e.from_state, to_state=e.to_state, pending=e.pending, result=e.result,
                     data=e.data)

    def _retained_from(self, adding: int) -> int:
        """The first seq to keep once ``adding`` more events are stored (retention 0 = keep all)."""
        retention = self._rt.options.event_retention
        return self.next_seq + adding - retention if retention > 0 else 0

    def _drop_slack(self) -> int:
        """How many events past the retention may wait for the next drop: dropping the oldest
        events rewrites the left edge of the event table, so past a retention of 16 events they
        are dropped in batches (1/16 of the retention, at most 1,024) rather than at every commit."""
        return min(DROP_BATCH_MAX, self._rt.options.event_retention // 16)

    def _publish(self, events: list[Event]) -> None:
        self._rt.publish(events)


def _merge(into: Batch, later: Batch) -> None:
    """Fold ``later`` into ``into``: its records win, its messages and truncations follow."""
    into.runtimes.update(later.runtimes)
    into.handles.update(later.handles)
    into.truncate += later.truncate
    into.messages += later.messages
    into.checkpoints.update(later.checkpoints)
    into.requests.update(later.requests)
