"""A ``Batch`` as SQL statements, and the writer thread that commits them to PostgreSQL.

``prepare`` runs on the caller's thread when ``commit`` is called, as LMDB's does: it
validates every id (the same key rules, ``codec``), encodes every record into the
same envelope bytes and snapshots the batch, so a bad batch fails before any
transaction and the caller may reuse its dicts at once. A batch becomes a list of
``Step`` (one statement, many parameter rows) in LMDB's apply order, after the lease
fences of a cluster (``tn_fence``: the batch lands only while its leases hold): purge,
runtimes, handles (with their index columns), truncate, messages, checkpoints,
requests, events, dropped events.

``PgWriter`` is ``lmdb_write.Writer`` with a database transaction instead of an
LMDB one: one batch per transaction (one COMMIT, one WAL flush when
``synchronous_commit`` is on), in call order; a failed transaction kept nothing.
Grouping is the engine committer's: the batch it hands over already holds every
change queued behind the previous commit, of every runtime, with each runtime's
fence. The statements of a transaction go in one pipeline with one Sync (one round
trip: ``_write``). ``PgStore`` runs several writers (commit lanes), each on its own
connection, so the transactions of runtimes in different lanes overlap. A
serialisation failure or deadlock retries the transaction; a lost connection fails
it with ``StoreUnavailable`` and the link reconnects in the background (``pg_link``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import psycopg

from ..errors import StoreError
from ..model import JSON
from . import codec
from .base import Batch, HandleKey
from .codec import Table
from .expiry import expiry_of
from .lmdb_write import ErrorMapper, Writer
from .pg_link import Link, OneConnection, is_retryable
from .pg_schema import RUNTIME_TABLES
from .summary import contribution, summarize

Step = tuple[str, list[tuple[Any, ...]]]
MAX_INDEX = (1 << 63) - 1  # bigint
SERIALIZATION_RETRIES = 5


def _upsert(table: str, keys: tuple[str, ...], extra: tuple[str, ...] = ()) -> str:
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
    steps.append(("SELECT tn_fence(%s, %s, %s, %s)", fences))
    purge = [(rid,) for rid in batch.purge if codec.runtime_key(rid)]
    steps += [(f"DELETE FROM {table} WHERE rid = %s", purge) for table in RUNTIME_TABLES if purge]
    runtimes = {(rid, ""): rec for rid, rec in batch.runtimes.items()}
    steps += _keyed(Table.RUNTIMES, runtimes, lambda rid, _: codec.runtime_key(rid), single=True)
    steps += _keyed(Table.HANDLES, batch.handles, codec.pair_key, index=True)
    truncate = [(rid, hid, _index(codec.message_key(rid, hid, i), i)) for rid, hid, i in batch.truncate]
    steps.append(("DELETE FROM tn_messages WHERE rid = %s AND hid = %s AND idx >= %s", truncate))
    messages = []
    for rid, hid, i, msg in batch.messages:
        key = codec.message_key(rid, hid, i)
        messages.append((rid, hid, _index(key, i), codec.encode_value(Table.MESSAGES, key, msg)))
    steps.append((SQL["messages"], messages))
    steps += _keyed(Table.CHECKPOINTS, batch.checkpoints, codec.pair_key)
    steps += _keyed(Table.REQUESTS, batch.requests, codec.pair_key)
    steps += _keyed(Table.VERSIONS, batch.versions, codec.pair_key)
    events = []
    for event in batch.events:
        key, value = codec.encode_event(event)
        events.append((event.runtime_id, _index(key, event.seq), value))
    steps.append((SQL["events"], events))
    drops = [(rid, below) for rid, below in batch.drop_events if codec.runtime_key(rid) and below > 1]
    steps.append(("DELETE FROM tn_events WHERE rid = %s AND seq < %s",
                  [(rid, min(below, MAX_INDEX)) for rid, below in drops]))
    return [step for step in steps if step[1]]


def _index(key: bytes, n: int) -> int:
    if n > MAX_INDEX:
        raise StoreError(f"invalid index or seq {n} of {codec.describe_key(Table.EVENTS, key)}: "
                         f"at most {MAX_INDEX} on PostgreSQL")
    return n


def _keyed(table: Table, records: Mapping[HandleKey, JSON | None], key_of: Any, *, single: bool = False,
           index: bool = False) -> list[Step]:
    puts: list[tuple[Any, ...]] = []
    deletes: list[tuple[Any, ...]] = []
    for (rid, sub), rec in records.items():
        key = key_of(rid, sub)
        ids: tuple[Any, ...] = (rid,) if single else (rid, sub)
        if rec is None:
            deletes.append(ids)
            continue
        row: tuple[Any, ...] = (*ids, codec.encode_value(table, key, rec))
        if index:
            c = contribution(summarize(rec))
            row += (c.recover, c.state, c.open_kind, c.since, expiry_of(rec))
        puts.append(row)
    return [(DELETE[table.value], deletes), (SQL[table.value], puts)]


class PgWriter(Writer):
    """One thread writing to the database on its own connection: one batch per transaction, in
    call order (one commit lane of ``PgStore``)."""

    def __init__(self, link: Link, map_error: ErrorMapper, *, name: str = "pg-commit") -> None:
        self._conn = OneConnection(link)
        super().__init__(cast(Any, None), {}, map_error, name=name)

    def _transaction(self, ops: list[Any]) -> None:
        steps = cast(list[Step], ops)
        self._conn.run(lambda conn: _write(conn, steps))

    def close(self) -> None:
        super().close()
        self._conn.close()


def _write(conn: psycopg.Connection[tuple[object, ...]], steps: list[Step]) -> None:
    """One batch's ``steps`` in one transaction and one round trip; a serialisation failure or
    deadlock runs the transaction again.

    The connection is in autocommit mode and the statements go in one pipeline that ends in its
    only Sync: PostgreSQL runs everything before a Sync as one implicit transaction, committed
    at the Sync when every statement succeeded and rolled back otherwise. An explicit
    ``conn.transaction()`` would cost two more round trips (its BEGIN, its COMMIT)."""
    for attempt in range(SERIALIZATION_RETRIES + 1):
        try:
            with conn.pipeline(), conn.cursor() as cur:
                for sql, rows in steps:
                    cur.executemany(sql.encode(), rows)
            return
        except psycopg.Error as exc:
            if not is_retryable(exc) or attempt == SERIALIZATION_RETRIES:
                raise
