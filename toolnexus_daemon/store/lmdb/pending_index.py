"""The pending index of LMDB: every open suspension, oldest first, across runtimes and per runtime.

``ListPending`` pages through open suspensions of every runtime (or one), of
every kind (or one), oldest first; with 100,000 handles parked a page must cost
what it costs with ten. So beside ``handle_index``'s own rows, and in the same
write transaction, each open suspension (a ``summary.Contribution`` with an
``open_kind``) has four rows in the ``handle_index`` table:

  NUL 0x10 since rid# hid#              every runtime, every kind
  NUL 0x11 kind# since rid# hid#        every runtime, one kind
  rid NUL 0x04 since hid#               one runtime, every kind
  rid NUL 0x05 kind# since hid#         one runtime, one kind

(``since`` is microseconds as u64be, ``#`` an 8-byte digest, as in
``handle_index``.) Each value names the suspension: JSON ``[rid, hid, kind]``.
The first two families start with NUL, which no runtime id does, so they never
fall under a runtime's prefix; a purge (which drops the prefix) removes them
first through the runtime's own rows (``drop_runtime``). Equal ``since`` order
by the digests, which never change, so a row is a stable page cursor.
"""

from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import lmdb

from ...errors import StoreError
from .. import codec
from ..base import PendingQuery, PendingRow
from ..codec import Table
from ..summary import Contribution

GLOBAL_ALL = b"\x00\x10"
GLOBAL_KIND = b"\x00\x11"
RUNTIME_ALL = b"\x04"
RUNTIME_KIND = b"\x05"
_U64 = struct.Struct(">Q")
_MAX_US = (1 << 64) - 1

Tables = Mapping[Table, lmdb._Database]


@dataclass(frozen=True)
class DropRuntime:
    """A purge of ``runtime_id``: remove its rows outside its key prefix (applied before the drop)."""

    runtime_id: str


def move(txn: lmdb.Transaction, db: lmdb._Database, runtime_id: str, handle_id: str,
         before: Contribution | None, after: Contribution | None) -> None:
    """A handle's contribution changes from ``before`` to ``after``: move its pending rows."""
    old, new = _open(before), _open(after)
    if old == new:
        return
    if old is not None:
        for key in _keys(runtime_id, handle_id, *old):
            txn.delete(key, db=db)
    if new is not None:
        value = codec.dump_json("handle_index/pending", [runtime_id, handle_id, new[0]])
        for key in _keys(runtime_id, handle_id, *new):
            txn.put(key, value, db=db)


def drop_runtime(txn: lmdb.Transaction, db: lmdb._Database, runtime_id: str) -> None:
    """Delete the cross-runtime rows of every open suspension of ``runtime_id``."""
    prefix = codec.runtime_prefix(runtime_id) + RUNTIME_ALL
    cursor = txn.cursor(db=db)
    if not cursor.set_range(prefix):
        return
    doomed = []
    for key, value in cursor.iternext():
        if not bytes(key).startswith(prefix):
            break
        rid, hid, kind = _decoded(bytes(key), bytes(value))
        since_us = _U64.unpack(bytes(key)[len(prefix):len(prefix) + 8])[0]
        doomed.extend(_global_keys(rid, hid, kind, since_us))
    for key in doomed:
        txn.delete(key, db=db)


def build(txn: lmdb.Transaction, dbs: Tables,
          contribution_of: Callable[[bytes, bytes], Contribution | None]) -> int:
    """Add the pending rows of every stored handle (a store written before this index existed);
    ``contribution_of(key, raw)`` is a handle's contribution, or None for a damaged record."""
    built = 0
    for raw_key, raw_value in txn.cursor(db=dbs[Table.HANDLES]).iternext():
        key = bytes(raw_key)
        c = contribution_of(key, bytes(raw_value))
        if c is None or c.open_kind is None:
            continue
        rid, _, hid = key.decode("utf-8").partition("\x00")
        move(txn, dbs[Table.HANDLE_INDEX], rid, hid, None, c)
        built += 1
    return built


def read(txn: lmdb.Transaction, db: lmdb._Database, query: PendingQuery) -> list[PendingRow]:
    """Up to ``query.limit`` rows of the family ``query`` selects, from its cursor on."""
    if query.limit <= 0:
        return []
    prefix = _family(query)
    start = prefix + _U64.pack(_us(query.oldest) if query.oldest is not None else 0)
    if query.after is not None:
        start = max(start, prefix + _position(query.after, query.runtime_id is None) + b"\x00")
    stop = None if query.newest is None else prefix + _U64.pack(min(_us(query.newest) + 1, _MAX_US))
    cursor = txn.cursor(db=db)
    rows: list[PendingRow] = []
    if not cursor.set_range(start):
        return rows
    for key, value in cursor.iternext():
        k = bytes(key)
        if not k.startswith(prefix) or (stop is not None and k >= stop) or len(rows) >= query.limit:
            break
        rid, hid, _ = _decoded(k, bytes(value))
        rows.append(PendingRow(_U64.unpack(k[len(prefix):len(prefix) + 8])[0] / 1e6, rid, hid))
    return rows


# ------------------------------------------------------------------ keys

def _open(c: Contribution | None) -> tuple[str, int] | None:
    """(kind, since in µs) of an open suspension; None when ``c`` is not one."""
    if c is None or c.open_kind is None:
        return None
    return c.open_kind, _us(c.since)


def _us(seconds: float) -> int:
    """Seconds as the index's microseconds (how ``handle_index`` writes ``since`` too)."""
    return min(max(0, int(seconds * 1e6)), _MAX_US)


def _keys(runtime_id: str, handle_id: str, kind: str, since_us: int) -> list[bytes]:
    prefix, since, h = codec.runtime_prefix(runtime_id), _U64.pack(since_us), _digest(handle_id)
    return [*_global_keys(runtime_id, handle_id, kind, since_us),
            prefix + RUNTIME_ALL + since + h, prefix + RUNTIME_KIND + _digest(kind) + since + h]


def _global_keys(runtime_id: str, handle_id: str, kind: str, since_us: int) -> list[bytes]:
    tail = _U64.pack(since_us) + _digest(runtime_id) + _digest(handle_id)
    return [GLOBAL_ALL + tail, GLOBAL_KIND + _digest(kind) + tail]


def _family(query: PendingQuery) -> bytes:
    if query.runtime_id is None:
        return GLOBAL_ALL if query.kind is None else GLOBAL_KIND + _digest(query.kind)
    prefix = codec.runtime_prefix(query.runtime_id)
    return prefix + (RUNTIME_ALL if query.kind is None else RUNTIME_KIND + _digest(query.kind))


def _position(row: PendingRow, across_runtimes: bool) -> bytes:
    """Where ``row`` sits in its family, after the family's prefix."""
    since = _U64.pack(_us_exact(row.since))
    return since + (_digest(row.runtime_id) if across_runtimes else b"") + _digest(row.handle_id)


def _us_exact(seconds: float) -> int:
    """A cursor's ``since`` came from a key (µs / 1e6): round, so it finds that key again."""
    return min(max(0, round(seconds * 1e6)), _MAX_US)


def _decoded(key: bytes, value: bytes) -> tuple[str, str, str]:
    """A row's ``[rid, hid, kind]``; a damaged row is a ``StoreError`` naming its key."""
    where = f"handle_index/{codec.describe_key(Table.HANDLE_INDEX, key)}"
    try:
        found = json.loads(value)
    except (UnicodeDecodeError, ValueError) as exc:
        raise StoreError(f"damaged pending index row {where}: {exc}") from exc
    if not isinstance(found, list) or len(found) != 3:
        raise StoreError(f"damaged pending index row {where}: expected [runtime id, handle id, kind]")
    return str(found[0]), str(found[1]), str(found[2])


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogateescape"), digest_size=8).digest()
