"""The index kept beside every handle record, in the transaction that writes it.

A start must find the handles to recover, and a metrics scrape must count
handles by state and tell the age of the oldest open suspension — with
100,000 handles parked, neither may read every handle. So whenever a handle
record is written or deleted, the writer thread updates, in the same write
transaction, what that handle contributes to one ``handle_index`` table,
whose keys start with the runtime prefix and a tag:

  rid NUL 0x01                          -> census {"states": {state: n}, "open": {kind: n}}
  rid NUL 0x02 hid                      -> b""  a handle a start must look at
  rid NUL 0x03 kind# since:u64be hid#   -> b""  an open suspension, oldest first per kind

(``kind#``/``hid#`` are 8-byte digests, so a key stays inside LMDB's limit
whatever the lengths of the ids; ``since`` is microseconds since the epoch.)
One table, so a commit that changes a handle's state dirties one more leaf
page or two, not a B-tree path in each of several tables.

A handle's contribution is a pure function of its record (``summary``): the
writer reads the record being replaced, takes back what it contributed and
adds what the new one does, so the index can never drift from the records,
and a purge of the runtime's prefix removes it with everything else.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Mapping

import lmdb

from ...errors import StoreError
from ...model import JSON
from .. import codec
from ..codec import Table
from ..summary import Contribution, contribution, summarize
from . import pending_index

CENSUS_TAG = b"\x01"
RECOVERY_TAG = b"\x02"
SUSPENSION_TAG = b"\x03"
_SINCE = struct.Struct(">Q")

Tables = Mapping[Table, lmdb._Database]


class Written:
    """What one writer last wrote to each of its recently written handle records: the record's bytes
    and their contribution, so the next write of that handle takes back what the stored record
    contributes without decoding and summarizing it again (the record a write replaces is nearly
    always the one this writer wrote last). Used only when the stored bytes are exactly those
    bytes: a contribution is a pure function of the record, so a record written otherwise (an
    aborted transaction, another daemon, an older store) is simply decoded. Bounded; the oldest
    entry goes first. One per writer thread (``LmdbWrites``), never shared between threads."""

    def __init__(self, size: int = 1024) -> None:
        self._size = size
        self._by_key: dict[bytes, tuple[bytes, Contribution]] = {}

    def get(self, key: bytes, raw: bytes) -> Contribution | None:
        hit = self._by_key.get(key)
        return hit[1] if hit is not None and hit[0] == raw else None

    def remember(self, key: bytes, value: bytes | None, c: Contribution | None) -> None:
        by_key = self._by_key
        by_key.pop(key, None)
        if value is None or c is None:
            return
        if len(by_key) >= self._size:
            del by_key[next(iter(by_key))]
        by_key[key] = (value, c)


def replace(txn: lmdb.Transaction, dbs: Tables, runtime_id: str, handle_id: str,
            summary: JSON | None, value: bytes | None = None, written: Written | None = None) -> None:
    """Before a handle record is overwritten (or deleted, ``summary`` None): move its index rows
    from what the stored record contributes to what ``summary`` does. ``value`` is the new
    record's bytes, remembered in ``written`` with what it contributes (see ``Written``)."""
    key = codec.pair_key(runtime_id, handle_id)
    before = _stored_contribution(txn, dbs[Table.HANDLES], key, written)
    after = contribution(summary) if summary is not None else None
    if written is not None:
        written.remember(key, value, after)
    if before == after:
        return
    db = dbs[Table.HANDLE_INDEX]
    for row in _rows(runtime_id, handle_id, before) if before is not None else []:
        txn.delete(row, db=db)
    for row in _rows(runtime_id, handle_id, after) if after is not None else []:
        txn.put(row, b"", db=db)
    pending_index.move(txn, db, runtime_id, handle_id, before, after)
    _count(txn, db, runtime_id, [(c, sign) for c, sign in ((before, -1), (after, +1)) if c is not None])


def add(txn: lmdb.Transaction, dbs: Tables, runtime_id: str, handle_id: str, record: JSON) -> None:
    """Add the rows of a stored record that has none yet (building the index of an older store)."""
    c = contribution(summarize(record))
    for row in _rows(runtime_id, handle_id, c):
        txn.put(row, b"", db=dbs[Table.HANDLE_INDEX])
    pending_index.move(txn, dbs[Table.HANDLE_INDEX], runtime_id, handle_id, None, c)
    _count(txn, dbs[Table.HANDLE_INDEX], runtime_id, [(c, +1)])


def census_key(runtime_id: str) -> bytes:
    return codec.runtime_prefix(runtime_id) + CENSUS_TAG


def recovery_prefix(runtime_id: str) -> bytes:
    return codec.runtime_prefix(runtime_id) + RECOVERY_TAG


def suspension_prefix(runtime_id: str, kind: str) -> bytes:
    return codec.runtime_prefix(runtime_id) + SUSPENSION_TAG + _digest(kind)


def since_of(suspension_key: bytes) -> float:
    """The ``since`` (seconds) of a suspension row's key."""
    return float(_SINCE.unpack(suspension_key[-16:-8])[0]) / 1e6


def _stored_contribution(txn: lmdb.Transaction, db: lmdb._Database, key: bytes,
                         written: Written | None) -> Contribution | None:
    """What the record a write replaces contributes (None: there is none, or it is damaged)."""
    raw = txn.get(key, db=db)
    if raw is None:
        return None
    raw = bytes(raw)
    known = written.get(key, raw) if written is not None else None
    if known is not None:
        return known
    old = _decoded_record(key, raw)
    return contribution(summarize(old)) if old is not None else None


def _decoded_record(key: bytes, raw: bytes) -> JSON | None:
    """The record a write replaces, read for its summary only (``codec.peek_value``)."""
    try:
        return codec.peek_value(Table.HANDLES, key, raw)
    except StoreError:
        return None  # a damaged record added nothing when the index was built; it takes nothing back


def _rows(runtime_id: str, handle_id: str, c: Contribution) -> list[bytes]:
    rows = []
    if c.recover:
        rows.append(recovery_prefix(runtime_id) + codec.id_bytes("handle id", handle_id))
    if c.open_kind is not None:
        since_us = max(0, int(c.since * 1e6))
        rows.append(suspension_prefix(runtime_id, c.open_kind) + _SINCE.pack(since_us) + _digest(handle_id))
    return rows


def _count(txn: lmdb.Transaction, db: lmdb._Database, runtime_id: str,
           changes: list[tuple[Contribution, int]]) -> None:
    """Apply every (contribution, ±1) to the runtime's census in one read and one write."""
    changes = [(c, sign) for c, sign in changes if c.state is not None or c.open_kind is not None]
    if not changes:
        return
    key = census_key(runtime_id)
    census = _decoded_census(key, txn.get(key, db=db))
    for c, sign in changes:
        if c.state is not None:
            _bump(census.setdefault("states", {}), c.state, sign)
        if c.open_kind is not None:
            _bump(census.setdefault("open", {}), c.open_kind, sign)
    txn.put(key, codec.encode_value(Table.HANDLE_INDEX, key, census), db=db)


def _decoded_census(key: bytes, raw: bytes | memoryview | None) -> JSON:
    if raw is None:
        return {}
    try:
        return codec.decode_value(Table.HANDLE_INDEX, key, bytes(raw))
    except StoreError:
        return {}


def _bump(counts: dict[str, int], name: str, sign: int) -> None:
    n = int(counts.get(name, 0)) + sign
    if n > 0:
        counts[name] = n
    else:
        counts.pop(name, None)


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogateescape"), digest_size=8).digest()
