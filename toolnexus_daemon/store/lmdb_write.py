"""A ``Batch`` turned into byte-level operations, and those applied in one LMDB write txn.

``prepare`` runs on the caller's thread when ``commit`` is called: it snapshots
the batch (the caller may reuse its dicts the moment ``commit`` is called) and
surfaces bad ids or unencodable records before any transaction starts. The
writer thread then only does LMDB work. Two operations cover every write:
``Put`` (a ``None`` value deletes) and ``DropFrom`` (delete every key of a
prefix from a start key on), which serves both ``truncate`` and ``purge``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import lmdb

from . import codec
from .base import Batch, HandleKey
from .codec import Table


@dataclass(frozen=True)
class Put:
    table: Table
    key: bytes
    value: bytes | None


@dataclass(frozen=True)
class DropFrom:
    """Delete every key of ``table`` that starts with ``prefix`` and is ``>= start``."""

    table: Table
    prefix: bytes
    start: bytes


Op = Put | DropFrom
Tables = Mapping[Table, lmdb._Database]


def prepare(batch: Batch) -> list[Op]:
    """Every write of ``batch`` in apply order: purge, runtimes, handles, truncate, messages,
    checkpoints, requests, events."""
    ops: list[Op] = []
    for rid in batch.purge:
        ops.extend(_purge(rid))
    for rid, runtime in batch.runtimes.items():
        ops.append(_put(Table.RUNTIMES, codec.runtime_key(rid), runtime))
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
    return ops


def _put(table: Table, key: bytes, record: Any) -> Put:
    return Put(table, key, None if record is None else codec.encode_value(table, key, record))


def _pairs(table: Table, records: Mapping[HandleKey, Any]) -> list[Op]:
    return [_put(table, codec.pair_key(rid, sub_id), rec) for (rid, sub_id), rec in records.items()]


def _purge(runtime_id: str) -> list[Op]:
    prefix = codec.runtime_prefix(runtime_id)
    drops: list[Op] = [DropFrom(t, prefix, prefix) for t in Table if t is not Table.RUNTIMES]
    return [Put(Table.RUNTIMES, codec.runtime_key(runtime_id), None), *drops]


def apply(txn: lmdb.Transaction, dbs: Tables, ops: list[Op]) -> None:
    """Apply ``ops`` in order inside ``txn`` (the caller commits or aborts it)."""
    for op in ops:
        if isinstance(op, Put):
            _apply_put(txn, dbs[op.table], op)
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
    while bytes(cursor.key()).startswith(op.prefix):
        if not cursor.delete():
            return
