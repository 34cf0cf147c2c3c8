"""A ``Batch`` turned into byte-level operations, and the writer thread that applies them.

``prepare`` runs on the caller's thread when ``commit`` is called: it snapshots
the batch (the caller may reuse its dicts the moment ``commit`` is called) and
surfaces bad ids or unencodable records before any transaction starts. The
writer thread then only does LMDB work. Two operations cover every write:
``Put`` (a ``None`` value deletes) and ``DropFrom`` (delete the keys of a
prefix in a key range), which serves ``truncate``, ``purge`` and ``drop_events``;
``IndexHandle`` keeps the handle indexes (``handle_index``) beside each handle record.

``Writer`` is that thread: it keeps the event loop off the disk. It writes
exactly one batch per transaction, in call order, and a batch's future resolves
only after its transaction has committed (and so, on a synced store, synced);
a failed transaction kept nothing. It does not group: the engine's committer
(``engine/committer.py``) already hands the store one batch holding every
change queued while the previous transaction was syncing, of every runtime.
"""

from __future__ import annotations

import concurrent.futures
import threading
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
    ops.extend(_pairs(Table.VERSIONS, batch.versions))
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


# ------------------------------------------------------------------ the writer thread

ErrorMapper = Callable[[Exception], Exception]
"""Turns what a failed transaction raised into what the batch's caller sees (``StoreFull`` …)."""


@dataclass(frozen=True)
class WriterStats:
    """What the writer did so far: ``transactions`` committed (one batch each), ``failed``
    transactions (nothing of them kept), and how many batches are ``queued`` right now."""

    transactions: int
    failed: int
    queued: int


@dataclass
class _Queued:
    ops: list[Op]
    done: concurrent.futures.Future[None]


class Writer:
    """The one thread that writes to an environment: one batch per transaction, in call order."""

    def __init__(self, env: lmdb.Environment, dbs: Tables, map_error: ErrorMapper, *,
                 name: str = "lmdb-commit") -> None:
        self._env, self._dbs, self._map_error = env, dbs, map_error
        self._queue: deque[_Queued] = deque()
        self._cond = threading.Condition()
        self._closing = False
        self._counts = [0, 0]  # transactions, failed
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
            (txns, failed), queued = self._counts, len(self._queue)
        return WriterStats(transactions=txns, failed=failed, queued=queued)

    def close(self) -> None:
        """Write every batch already queued, then stop the thread. Safe to call twice."""
        with self._cond:
            self._closing = True
            self._cond.notify()
        if threading.current_thread() is not self._thread:
            self._thread.join()

    def _run(self) -> None:
        while (item := self._next()) is not None:
            self._write(item)

    def _next(self) -> _Queued | None:
        """Block for the next batch; None once closing and every queued batch is written."""
        with self._cond:
            while not self._queue and not self._closing:
                self._cond.wait()
            if not self._queue:
                return None
            item = self._queue.popleft()
        # a cancelled future still gets its batch written: commit() promised to finish it
        item.done.set_running_or_notify_cancel()
        return item

    def _write(self, item: _Queued) -> None:
        try:
            self._transaction(item.ops)
        except Exception as exc:  # nothing of the batch was kept
            self._count(failed=1)
            _fail(item.done, self._error_for(exc))
            return
        self._count(transactions=1)
        _resolve(item.done)

    def _error_for(self, exc: Exception) -> Exception:
        """The caller's error; a mapper that fails itself must not kill the writer thread."""
        try:
            return self._map_error(exc)
        except Exception as mapping:
            return StoreError(f"store write failed: {exc!r} (and describing it failed: {mapping!r})")

    def _transaction(self, ops: list[Op]) -> None:
        with self._env.begin(write=True) as txn:
            apply(txn, self._dbs, ops)

    def _count(self, *, transactions: int = 0, failed: int = 0) -> None:
        with self._cond:
            self._counts[0] += transactions
            self._counts[1] += failed


def _resolve(done: concurrent.futures.Future[None]) -> None:
    if not done.done():
        done.set_result(None)


def _fail(done: concurrent.futures.Future[None], error: Exception) -> None:
    if not done.done():
        done.set_exception(error)
