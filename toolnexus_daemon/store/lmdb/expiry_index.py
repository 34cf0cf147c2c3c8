"""LMDB's expiry index: the open suspensions of a runtime, soonest deadline first.

The daemon must fire a suspension's deadline on time, and find the due and next
deadlines at a start or a cluster take-over — without reading every handle. So
every handle write also moves, in the same write transaction, that handle's row in
one ``expiries`` table (keys under the runtime prefix, so a purge drops them):

  rid NUL 0x01 expires:u64be hid#   -> hid     an open suspension, soonest first
  rid NUL 0x02 hid#                 -> expires where a handle's row is (u64be)

``expires`` is microseconds since the epoch; ``hid#`` a 16-byte digest of the
handle id, so a key stays inside LMDB's limit whatever the id's length. The second
row lets a write move a handle's row without decoding the record it replaces. What a
record contributes is ``expiry.expiry_of`` (the rule memory and PostgreSQL share).

A store written before this index existed gets it built when first opened by a daemon
that keeps it (``build``, in the opening transaction, marked done in ``meta``), apart
from the store's format version so it merges with other index changes.
"""

from __future__ import annotations

import hashlib
import logging
import struct
from collections.abc import Mapping
from dataclasses import dataclass

import lmdb

from ...errors import StoreError
from .. import codec
from ..codec import Table
from ..expiry import expiry_of, micros

log = logging.getLogger("toolnexus_daemon.store")

DUE_TAG = b"\x01"
WHERE_TAG = b"\x02"
META_BUILT_KEY = b"expiry_index"
_U64 = struct.Struct(">Q")

Tables = Mapping[Table, lmdb._Database]


@dataclass(frozen=True)
class IndexExpiry:
    """Move a handle's expiry row to ``expires`` (seconds; None: it has none). Applied beside the
    handle record's own ``Put``."""

    runtime_id: str
    handle_id: str
    expires: float | None


def ops(handles: Mapping[tuple[str, str], object]) -> list[IndexExpiry]:
    """The expiry moves of a batch's handle writes (``None`` records are deletions)."""
    return [IndexExpiry(rid, hid, expiry_of(rec) if isinstance(rec, dict) else None)
            for (rid, hid), rec in handles.items()]


def apply(txn: lmdb.Transaction, dbs: Tables, op: IndexExpiry) -> None:
    db = dbs[Table.EXPIRIES]
    where = _where_key(op.runtime_id, op.handle_id)
    old = txn.get(where, db=db)
    new = None if op.expires is None else _U64.pack(micros(op.expires))
    if old is not None and new is not None and bytes(old) == new:
        return
    if old is not None:
        txn.delete(_due_key(op.runtime_id, op.handle_id, bytes(old)), db=db)
        txn.delete(where, db=db)
    if new is not None:
        txn.put(_due_key(op.runtime_id, op.handle_id, new), op.handle_id.encode("utf-8", "surrogateescape"),
                db=db)
        txn.put(where, new, db=db)


def due_prefix(runtime_id: str) -> bytes:
    return codec.runtime_prefix(runtime_id) + DUE_TAG


def row_of(key: bytes, value: bytes) -> tuple[float, str]:
    """(expires in seconds, handle id) of a due row."""
    us = _U64.unpack(key[-24:-16])[0]
    return us / 1e6, value.decode("utf-8", "surrogateescape")


def build(txn: lmdb.Transaction, dbs: Tables, meta: lmdb._Database) -> None:
    """Index every stored open suspension, once per store (a store made by this daemon has none)."""
    if txn.get(META_BUILT_KEY, db=meta) is not None:
        return
    indexed = 0
    for raw_key, raw_value in txn.cursor(db=dbs[Table.HANDLES]).iternext():
        key = bytes(raw_key)
        try:
            record = codec.decode_value(Table.HANDLES, key, bytes(raw_value))
        except StoreError:
            continue  # reported, with its key, when the handle is read
        expires = expiry_of(record)
        if expires is None:
            continue
        rid, _, hid = key.decode("utf-8").partition("\x00")
        apply(txn, dbs, IndexExpiry(rid, hid, expires))
        indexed += 1
    txn.put(META_BUILT_KEY, b"1", db=meta)
    if indexed:
        log.warning("expiry index built for the open suspensions of the store", extra={"indexed": indexed})


def _due_key(runtime_id: str, handle_id: str, expires: bytes) -> bytes:
    return due_prefix(runtime_id) + expires + _digest(handle_id)


def _where_key(runtime_id: str, handle_id: str) -> bytes:
    return codec.runtime_prefix(runtime_id) + WHERE_TAG + _digest(handle_id)


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogateescape"), digest_size=16).digest()
