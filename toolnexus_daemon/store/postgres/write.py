"""PostgreSQL's half of the commit path: a ``Batch`` as SQL statements, a statement per table.

``prepare`` runs on the caller's thread when ``commit`` is called, as LMDB's does: it
validates every id (the same key rules, ``codec``), encodes every record into the
same envelope bytes and snapshots the batch, so a bad batch fails before any
transaction and the caller may reuse its dicts at once. A batch becomes a list of
``Step`` (one statement and its parameter rows) in LMDB's apply order, after the lease
fences of a cluster (``tn_fence``: the batch lands only while its leases hold): purge,
runtimes, handles (with their index columns), truncate, messages, checkpoints,
requests, events, dropped events. Fences and upserts send every row of a table in one
statement, its columns as arrays (``UPSERT``): the daemon's work per transaction (its
sending, reading a result per statement) goes with the statements, not the rows.

The commit lanes (``lanes``) send a batch's steps as one transaction (one COMMIT, one WAL
flush when ``synchronous_commit`` is on) whose statements go in one pipeline with one Sync
(one round trip: ``lanes.write``; ``_write`` here is the same on a blocking connection, for
the benchmarks that time the statements without a daemon).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import psycopg

from ...errors import StoreError
from ...model import JSON
from .. import codec
from ..base import Batch, HandleKey
from ..codec import Table
from ..expiry import expiry_of
from ..summary import contribution, summarize
from .link import is_retryable
from .schema import RUNTIME_TABLES

Row = tuple[object, ...]
# one statement and its parameter rows (executemany; one row of column arrays for ``UPSERT`` and ``FENCE``)
Step = tuple[str, Sequence[Row]]
MAX_INDEX = (1 << 63) - 1  # bigint
SERIALIZATION_RETRIES = 5


def _upsert(table: str, keys: tuple[str, ...], extra: tuple[str, ...] = ()) -> str:
    """One row's upsert (``SQL``: what the benchmarks of the statements' floor send)."""
    cols = (*keys, "value", *extra)
    sets = ", ".join(f"{c} = EXCLUDED.{c}" for c in ("value", *extra))
    return (f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join(['%s'] * len(cols))}) "
            f"ON CONFLICT ({', '.join(keys)}) DO UPDATE SET {sets}")


_HANDLE_COLS = ("recover", "state", "open_kind", "since", "expires")
SQL = {
    "runtimes": _upsert("tn_runtimes", ("rid",)),
    "handles": _upsert("tn_handles", ("rid", "hid"), _HANDLE_COLS),
    "checkpoints": _upsert("tn_checkpoints", ("rid", "hid")),
    "requests": _upsert("tn_requests", ("rid", "qid")),
    "versions": _upsert("tn_versions", ("rid", "vid")),
    "messages": _upsert("tn_messages", ("rid", "hid", "idx")),
    "events": _upsert("tn_events", ("rid", "seq")),
}
# the column types of the array form (``UPSERT``): one parameter per column, every row's value in it
_TYPES = {"rid": "text", "hid": "text", "qid": "text", "vid": "text", "idx": "bigint", "seq": "bigint",
          "value": "bytea", "recover": "boolean", "state": "text", "open_kind": "text", "since": "float8",
          "expires": "float8"}


def _upsert_many(table: str, keys: tuple[str, ...], extra: tuple[str, ...] = ()) -> str:
    """``_upsert`` of any number of rows in one statement: each column one array, ``unnest`` the rows.
    The rows must have distinct keys (one INSERT … ON CONFLICT may not update a row twice)."""
    cols = (*keys, "value", *extra)
    arrays = ", ".join(f"%b::{_TYPES[c]}[]" for c in cols)
    sets = ", ".join(f"{c} = EXCLUDED.{c}" for c in ("value", *extra))
    return (f"INSERT INTO {table} ({', '.join(cols)}) SELECT * FROM unnest({arrays}) "
            f"ON CONFLICT ({', '.join(keys)}) DO UPDATE SET {sets}")


# what a commit sends: a statement per table, not per row (each row of a pipeline is a statement the
# daemon sends and whose result it reads: 17 rows in 5 statements on average in the bench's cycle)
UPSERT = {
    "runtimes": _upsert_many("tn_runtimes", ("rid",)),
    "handles": _upsert_many("tn_handles", ("rid", "hid"), _HANDLE_COLS),
    "checkpoints": _upsert_many("tn_checkpoints", ("rid", "hid")),
    "requests": _upsert_many("tn_requests", ("rid", "qid")),
    "versions": _upsert_many("tn_versions", ("rid", "vid")),
    "messages": _upsert_many("tn_messages", ("rid", "hid", "idx")),
    "events": _upsert_many("tn_events", ("rid", "seq")),
}
FENCE = ("SELECT tn_fence(f.rid, f.owner, f.incarnation, f.epoch) FROM "
         "unnest(%b::text[], %b::text[], %b::text[], %b::bigint[]) AS f(rid, owner, incarnation, epoch)")
DELETE = {"runtimes": "DELETE FROM tn_runtimes WHERE rid = %s",
          "handles": "DELETE FROM tn_handles WHERE rid = %s AND hid = %s",
          "checkpoints": "DELETE FROM tn_checkpoints WHERE rid = %s AND hid = %s",
          "requests": "DELETE FROM tn_requests WHERE rid = %s AND qid = %s",
          "versions": "DELETE FROM tn_versions WHERE rid = %s AND vid = %s"}


def prepare(batch: Batch) -> list[Step]:
    """Every statement of ``batch`` in apply order; raises ``StoreError`` for a bad id or record."""
    steps: list[Step] = []
    # the fence first: FOR SHARE holds the lease row until COMMIT, so a takeover waits for this
    # transaction and the next fenced commit of the old owner fails
    fences = [(f.runtime_id, f.owner, f.incarnation, f.epoch) for f in batch.fences
              if codec.runtime_key(f.runtime_id)]
    steps += _many(FENCE, fences)
    purge = [(rid,) for rid in batch.purge if codec.runtime_key(rid)]
    steps += [(f"DELETE FROM {table} WHERE rid = %s", purge) for table in RUNTIME_TABLES if purge]
    runtimes = {(rid, ""): rec for rid, rec in batch.runtimes.items()}
    steps += _keyed(Table.RUNTIMES, runtimes, lambda rid, _: codec.runtime_key(rid), single=True)
    steps += _keyed(Table.HANDLES, batch.handles, codec.pair_key, index=True)
    truncate = [(rid, hid, _index(codec.message_key(rid, hid, i), i)) for rid, hid, i in batch.truncate]
    steps.append(("DELETE FROM tn_messages WHERE rid = %s AND hid = %s AND idx >= %s", truncate))
    messages: dict[Row, Row] = {}  # by key, the last write of each (as statements in turn would leave it)
    for rid, hid, i, msg in batch.messages:
        key = codec.message_key(rid, hid, i)
        messages[(rid, hid, i)] = (rid, hid, _index(key, i), codec.encode_value(Table.MESSAGES, key, msg))
    steps += _many(UPSERT["messages"], list(messages.values()))
    steps += _keyed(Table.CHECKPOINTS, batch.checkpoints, codec.pair_key)
    steps += _keyed(Table.REQUESTS, batch.requests, codec.pair_key)
    steps += _keyed(Table.VERSIONS, batch.versions, codec.pair_key)
    events: dict[Row, Row] = {}
    for event in batch.events:
        key, value = codec.encode_event(event)
        events[(event.runtime_id, event.seq)] = (event.runtime_id, _index(key, event.seq), value)
    steps += _many(UPSERT["events"], list(events.values()))
    drops = [(rid, below) for rid, below in batch.drop_events if codec.runtime_key(rid) and below > 1]
    steps.append(("DELETE FROM tn_events WHERE rid = %s AND seq < %s",
                  [(rid, min(below, MAX_INDEX)) for rid, below in drops]))
    return [step for step in steps if step[1]]


def _index(key: bytes, n: int) -> int:
    if n > MAX_INDEX:
        raise StoreError(f"invalid index or seq {n} of {codec.describe_key(Table.EVENTS, key)}: "
                         f"at most {MAX_INDEX} on PostgreSQL")
    return n


def _keyed(table: Table, records: Mapping[HandleKey, JSON | None], key_of: Callable[[str, str], bytes], *,
           single: bool = False, index: bool = False) -> list[Step]:
    puts: list[Row] = []
    deletes: list[Row] = []
    for (rid, sub), rec in records.items():
        key = key_of(rid, sub)
        ids: Row = (rid,) if single else (rid, sub)
        if rec is None:
            deletes.append(ids)
            continue
        row: Row = (*ids, codec.encode_value(table, key, rec))
        if index:
            c = contribution(summarize(rec))
            row += (c.recover, c.state, c.open_kind, c.since, expiry_of(rec))
        puts.append(row)
    return [(DELETE[table.value], deletes), *_many(UPSERT[table.value], puts)]


def _many(sql: str, rows: Sequence[Row]) -> list[Step]:
    """``rows`` as the one parameter row of a statement of the array form (``UPSERT``, ``FENCE``):
    each column a list. Deletes stay a statement per row: a join on an array can be planned, and
    cached, as a scan of the whole table."""
    return [(sql, [tuple(list(column) for column in zip(*rows, strict=True))])] if rows else []


def _write(conn: psycopg.Connection[tuple[object, ...]], steps: list[Step]) -> None:
    """``lanes.write`` on a blocking connection (the benchmarks' ``bench/pg.py``)."""
    for attempt in range(SERIALIZATION_RETRIES + 1):
        try:
            with conn.pipeline(), conn.cursor() as cur:
                for sql, rows in steps:
                    cur.executemany(sql.encode(), rows)
            return
        except psycopg.Error as exc:
            if not is_retryable(exc) or attempt == SERIALIZATION_RETRIES:
                raise
