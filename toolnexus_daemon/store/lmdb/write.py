"""LMDB's half of the shared writer (``store.writer``): a ``Batch`` as byte-level operations, and
the write transaction that applies them.

``prepare`` runs on the caller's thread when ``commit`` is called: it snapshots
the batch (the caller may reuse its dicts the moment ``commit`` is called) and
surfaces bad ids or unencodable records before any transaction starts, so the
writer thread only does LMDB work. Two operations cover every write: ``Put`` (a
``None`` value deletes) and ``DropFrom`` (delete the keys of a prefix in a key
range), which serves ``truncate``, ``purge`` and ``drop_events``; ``IndexHandle``
and ``expiry_index.IndexExpiry`` keep the handle indexes beside each handle record.

``LmdbWrites`` is the ``writer.Backend`` of one environment: one lane (LMDB has one
writer), each batch in one write transaction (``apply``), a full map or disk
described as ``StoreFull``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import lmdb

from ...errors import StoreError, StoreFull
from ...model import JSON
from .. import codec
from ..base import Batch, HandleKey
from ..codec import Table
from ..summary import summarize
from . import expiry_index, handle_index, pending_index
from .datafile import disk_is_full, free_bytes


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
    # the record's bytes (the ``Put`` that follows), remembered with its contribution
    value: bytes | None = None


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
    # in this order as before (an error of a batch is the same one), each handle record encoded once
    summaries = [None if rec is None else summarize(rec) for rec in batch.handles.values()]
    expiries = expiry_index.ops(batch.handles)
    puts = _pairs(Table.HANDLES, batch.handles)
    ops.extend(IndexHandle(rid, hid, summary, put.value)
               for (rid, hid), summary, put in zip(batch.handles, summaries, puts, strict=True))
    ops.extend(expiries)
    ops.extend(puts)
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


def _put(table: Table, key: bytes, record: JSON | None) -> Put:
    return Put(table, key, None if record is None else codec.encode_value(table, key, record))


def _pairs(table: Table, records: Mapping[HandleKey, JSON | None]) -> list[Put]:
    return [_put(table, codec.pair_key(rid, sub_id), rec) for (rid, sub_id), rec in records.items()]


def _purge(runtime_id: str) -> list[Op]:
    prefix = codec.runtime_prefix(runtime_id)
    drops: list[Op] = [DropFrom(t, prefix, prefix) for t in Table if t is not Table.RUNTIMES]
    return [Put(Table.RUNTIMES, codec.runtime_key(runtime_id), None), pending_index.DropRuntime(runtime_id),
            *drops]


def apply(txn: lmdb.Transaction, dbs: Tables, ops: list[Op],
          written: handle_index.Written | None = None) -> None:
    """Apply ``ops`` in order inside ``txn`` (the caller commits or aborts it); ``written`` is the
    writer's memory of the handle records it wrote (``handle_index.Written``)."""
    for op in ops:
        if isinstance(op, Put):
            _apply_put(txn, dbs[op.table], op)
        elif isinstance(op, IndexHandle):
            handle_index.replace(txn, dbs, op.runtime_id, op.handle_id, op.summary, op.value, written)
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


class LmdbWrites:
    """The ``writer.Backend`` of the LMDB environment in ``path``: its one lane writes each batch
    in one write transaction."""

    def __init__(self, env: lmdb.Environment, dbs: Tables, path: Path) -> None:
        self._env, self._dbs, self._path = env, dbs, path
        # only the lane's one thread applies transactions, so only it touches this
        self._written = handle_index.Written()

    def prepare(self, batch: Batch) -> list[Op]:
        return prepare(batch)

    def admit(self) -> None:
        """A local environment takes every commit (a closed store is refused by the writer)."""

    def transact(self, lane: int, ops: list[Op]) -> None:
        with self._env.begin(write=True) as txn:
            apply(txn, self._dbs, ops, self._written)

    def failed(self, exc: Exception) -> Exception:
        """A full map or disk as ``StoreFull`` (the transaction was aborted, so nothing of the batch
        is kept), anything else as ``StoreError`` naming the directory (runs on the writer thread)."""
        if isinstance(exc, lmdb.MapFullError):
            error: Exception = StoreFull(
                f"the store map of {self._path} is full ({self._env.info()['map_size']} bytes); "
                f"restart toolnexus-daemon with a larger --map-size")
        elif isinstance(exc, lmdb.DiskError) or (isinstance(exc, lmdb.Error) and disk_is_full(self._path)):
            # a full disk surfaces as ENOSPC, or as EIO from the commit's write or sync
            error = StoreFull(f"the disk holding {self._path} is full ({free_bytes(self._path)} bytes free); "
                              "free space on it and retry")
        elif isinstance(exc, StoreError):
            return exc
        else:
            error = StoreError(f"store write to {self._path} failed: {exc}")
        error.__cause__ = exc
        return error
