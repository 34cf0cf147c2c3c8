"""A ``Batch`` turned into byte-level operations, and the writer thread that applies them.

``prepare`` runs on the caller's thread when ``commit`` is called: it snapshots
the batch (the caller may reuse its dicts the moment ``commit`` is called) and
surfaces bad ids or unencodable records before any transaction starts. The
writer thread then only does LMDB work. Two operations cover every write:
``Put`` (a ``None`` value deletes) and ``DropFrom`` (delete the keys of a
prefix in a key range), which serves ``truncate``, ``purge`` and ``drop_events``;
``IndexHandle`` keeps the handle indexes (``handle_index``) beside each handle record.

``GroupWriter`` is that thread, and it does group commit: a synced commit
costs one fsync whatever it holds, so every batch queued while the previous
transaction was syncing is applied, in call order, in ONE transaction with
one sync (up to ``max_group`` batches; after a group of several, a synced
writer waits up to ``window`` for as many again, which a lone committer never
pays). A batch's future resolves only after
the transaction holding it has committed (and so, on a synced store, synced).
When a group's transaction fails, nothing of it was kept, and the batches are
retried one transaction each, so only the batch that cannot land (a full map)
fails and its neighbours are unaffected — exactly as if each had committed
alone.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import lmdb

from ..errors import StoreError
from ..model import JSON
from . import codec, expiry_index, handle_index, pending_index
from .base import Batch, HandleKey
from .codec import Table
from .summary import summarize


@dataclass(frozen=True)
class Put:
    table: Table
    key: bytes
    value: bytes | None


@dataclass(frozen=True)
class DropFrom:
    """Delete every key of ``table`` that starts with ``prefix``, is ``>= start`` and (given a
    ``stop``) ``< stop``."""

    table: Table
    prefix: bytes
    start: bytes
    stop: bytes | None = None


@dataclass(frozen=True)
class IndexHandle:
    """Move a handle's rows in ``handle_index`` from what its stored record contributes to what
    ``summary`` (of the record about to be written; None: deleted) does. Applied just before
    the record's own ``Put``."""

    runtime_id: str
    handle_id: str
    summary: JSON | None


Op = Put | DropFrom | IndexHandle | pending_index.DropRuntime | expiry_index.IndexExpiry
Tables = Mapping[Table, lmdb._Database]


def prepare(batch: Batch) -> list[Op]:
    """Every write of ``batch`` in apply order: purge, runtimes, handle index rows, handles,
    truncate, messages, checkpoints, requests, events, dropped events."""
    ops: list[Op] = []
    for rid in batch.purge:
        ops.extend(_purge(rid))
    for rid, runtime in batch.runtimes.items():
        ops.append(_put(Table.RUNTIMES, codec.runtime_key(rid), runtime))
    ops.extend(IndexHandle(rid, hid, None if rec is None else summarize(rec))
               for (rid, hid), rec in batch.handles.items())
    ops.extend(expiry_index.ops(batch.handles))
    ops.extend(_pairs(Table.HANDLES, batch.handles))
    for rid, hid, index in batch.truncate:
        prefix = codec.message_prefix(rid, hid)
        ops.append(DropFrom(Table.MESSAGES, prefix, codec.message_key(rid, hid, index)))
    for rid, hid, index, message in batch.messages:
        ops.append(_put(Table.MESSAGES, codec.message_key(rid, hid, index), message))
    ops.extend(_pairs(Table.CHECKPOINTS, batch.checkpoints))
    ops.extend(_pairs(Table.REQUESTS, batch.requests))
    for event in batch.events:
        key, value = codec.encode_event(event)
        ops.append(Put(Table.EVENTS, key, value))
    for rid, below in batch.drop_events:
        prefix = codec.runtime_prefix(rid)
        if below > 1:  # seqs start at 1: nothing lies below 1
            ops.append(DropFrom(Table.EVENTS, prefix, prefix, stop=codec.event_key(rid, below)))
    return ops


def _put(table: Table, key: bytes, record: Any) -> Put:
    return Put(table, key, None if record is None else codec.encode_value(table, key, record))


def _pairs(table: Table, records: Mapping[HandleKey, Any]) -> list[Op]:
    return [_put(table, codec.pair_key(rid, sub_id), rec) for (rid, sub_id), rec in records.items()]


def _purge(runtime_id: str) -> list[Op]:
    prefix = codec.runtime_prefix(runtime_id)
    drops: list[Op] = [DropFrom(t, prefix, prefix) for t in Table if t is not Table.RUNTIMES]
    return [Put(Table.RUNTIMES, codec.runtime_key(runtime_id), None), pending_index.DropRuntime(runtime_id),
            *drops]


def apply(txn: lmdb.Transaction, dbs: Tables, ops: list[Op]) -> None:
    """Apply ``ops`` in order inside ``txn`` (the caller commits or aborts it)."""
    for op in ops:
        if isinstance(op, Put):
            _apply_put(txn, dbs[op.table], op)
        elif isinstance(op, IndexHandle):
            handle_index.replace(txn, dbs, op.runtime_id, op.handle_id, op.summary)
        elif isinstance(op, pending_index.DropRuntime):
            pending_index.drop_runtime(txn, dbs[Table.HANDLE_INDEX], op.runtime_id)
        elif isinstance(op, expiry_index.IndexExpiry):
            expiry_index.apply(txn, dbs, op)
        else:
            _drop_from(txn, dbs[op.table], op)


def _apply_put(txn: lmdb.Transaction, db: lmdb._Database, op: Put) -> None:
    if op.value is None:
        txn.delete(op.key, db=db)
    else:
        txn.put(op.key, op.value, db=db)


def _drop_from(txn: lmdb.Transaction, db: lmdb._Database, op: DropFrom) -> None:
    cursor = txn.cursor(db=db)
    if not cursor.set_range(op.start):
        return
    # Cursor.delete moves to the next record; past the last one key() is b"".
    while (key := bytes(cursor.key())).startswith(op.prefix) and (op.stop is None or key < op.stop):
        if not cursor.delete():
            return


# ------------------------------------------------------------------ group commit

ErrorMapper = Callable[[Exception], Exception]
"""Turns what a failed transaction raised into what the batch's caller sees (``StoreFull`` …)."""


@dataclass(frozen=True)
class WriterStats:
    """What the writer did so far: ``batches`` committed in ``transactions`` write transactions,
    ``failed`` batches refused, the ``largest_group`` of batches tried in one transaction, and how
    many batches are ``queued`` right now."""

    batches: int
    transactions: int
    failed: int
    largest_group: int
    queued: int


@dataclass
class _Queued:
    ops: list[Op]
    done: concurrent.futures.Future[None]


class GroupWriter:
    """The one thread that writes to an environment, grouping queued batches into shared transactions.

    ``window`` (seconds) makes a group that is not full wait that long for more
    batches before it starts; 0 groups only what queued up during the previous
    sync, which costs a lone committer nothing.
    """

    def __init__(self, env: lmdb.Environment, dbs: Tables, map_error: ErrorMapper, *,
                 max_group: int = 128, window: float = 0.0, name: str = "lmdb-commit") -> None:
        self._env, self._dbs, self._map_error = env, dbs, map_error
        self._max_group, self._window = max(1, max_group), max(0.0, window)
        self._queue: deque[_Queued] = deque()
        self._cond = threading.Condition()
        self._closing = False
        self._last_group = 1
        self._stats = [0, 0, 0, 0]  # batches, transactions, failed, largest group
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, ops: list[Op]) -> concurrent.futures.Future[None]:
        """Queue ``ops`` behind every batch submitted before; the future resolves once they are committed."""
        done: concurrent.futures.Future[None] = concurrent.futures.Future()
        with self._cond:
            if self._closing:
                raise StoreError("the store is closed")
            self._queue.append(_Queued(ops, done))
            self._cond.notify()
        return done

    def stats(self) -> WriterStats:
        with self._cond:
            batches, txns, failed, largest = self._stats
            queued = len(self._queue)
        return WriterStats(batches=batches, transactions=txns, failed=failed, largest_group=largest,
                           queued=queued)

    def close(self) -> None:
        """Write every batch already queued, then stop the thread. Safe to call twice."""
        with self._cond:
            self._closing = True
            self._cond.notify()
        if threading.current_thread() is not self._thread:
            self._thread.join()

    def _run(self) -> None:
        while True:
            group = self._next_group()
            if not group:
                return
            self._count(group=len(group))
            self._write_group(group)

    def _next_group(self) -> list[_Queued]:
        """Block for the first batch, then take what else is queued (waiting up to ``window``)."""
        with self._cond:
            while not self._queue and not self._closing:
                self._cond.wait()
            # wait for company only when the last group had some: a lone committer never waits
            want = min(self._last_group, self._max_group)
            deadline = time.monotonic() + self._window
            while (self._window and want > 1 and not self._closing and len(self._queue) < want
                   and (left := deadline - time.monotonic()) > 0):
                self._cond.wait(left)
            group = [self._queue.popleft() for _ in range(min(len(self._queue), self._max_group))]
            self._last_group = len(group)
        for item in group:
            # a cancelled future still gets its batch written: commit() promised to finish it
            item.done.set_running_or_notify_cancel()
        return group

    def _write_group(self, group: list[_Queued]) -> None:
        try:
            self._transaction(group)
        except Exception as exc:  # nothing of the group was kept; find the batch that cannot land
            if len(group) == 1:
                self._count(failed=1)
                _fail(group[0].done, self._error_for(exc))
                return
            for item in group:
                self._write_group([item])
            return
        self._count(batches=len(group), transactions=1)
        for item in group:
            _resolve(item.done)

    def _error_for(self, exc: Exception) -> Exception:
        """The caller's error; a mapper that fails itself must not kill the writer thread."""
        try:
            return self._map_error(exc)
        except Exception as mapping:
            return StoreError(f"store write failed: {exc!r} (and describing it failed: {mapping!r})")

    def _transaction(self, group: list[_Queued]) -> None:
        with self._env.begin(write=True) as txn:
            for item in group:
                apply(txn, self._dbs, item.ops)

    def _count(self, *, batches: int = 0, transactions: int = 0, failed: int = 0, group: int = 0) -> None:
        with self._cond:
            s = self._stats
            s[0], s[1], s[2], s[3] = s[0] + batches, s[1] + transactions, s[2] + failed, max(s[3], group)


def _resolve(done: concurrent.futures.Future[None]) -> None:
    if not done.done():
        done.set_result(None)


def _fail(done: concurrent.futures.Future[None], error: Exception) -> None:
    if not done.done():
        done.set_exception(error)
