"""PostgreSQL's half of the shared writer (``store.writer``): a ``Batch`` as SQL statements, and
the transaction of a commit lane that sends them.

``prepare`` runs on the caller's thread when ``commit`` is called, as LMDB's does: it
validates every id (the same key rules, ``codec``), encodes every record into the
same envelope bytes and snapshots the batch, so a bad batch fails before any
transaction and the caller may reuse its dicts at once. A batch becomes a list of
``Step`` (one statement, many parameter rows) in LMDB's apply order, after the lease
fences of a cluster (``tn_fence``: the batch lands only while its leases hold): purge,
runtimes, handles (with their index columns), truncate, messages, checkpoints,
requests, events, dropped events.

``PgWrites`` is the ``writer.Backend`` of one database: each commit lane has its own
connection, so the transactions of runtimes in different lanes overlap; a batch is one
transaction (one COMMIT, one WAL flush when ``synchronous_commit`` is on) whose
statements go in one pipeline with one Sync (one round trip: ``_write``). Commits are
refused at once while the database is down (``admit``). A serialisation failure or
deadlock retries the transaction; a lost connection fails it with ``StoreUnavailable``
and the link reconnects in the background (``link``).
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
from .link import Link, OneConnection, is_retryable
from .schema import RUNTIME_TABLES

Row = tuple[object, ...]
# one statement and its parameter rows (executemany)
Step = tuple[str, Sequence[Row]]
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
    return [(DELETE[table.value], deletes), (SQL[table.value], puts)]


class PgWrites:
    """The ``writer.Backend`` of one database: ``lanes`` connections, one per commit lane."""

    def __init__(self, link: Link, lanes: int) -> None:
        self._link = link
        self._conns = [OneConnection(link) for _ in range(max(lanes, 1))]

    def prepare(self, batch: Batch) -> list[Step]:
        return prepare(batch)

    def admit(self) -> None:
        """While the database is down a commit fails at once, naming it, instead of queueing."""
        if not self._link.up:
            raise self._link.unavailable()

    def transact(self, lane: int, ops: list[Step]) -> None:
        self._conns[lane].run(lambda conn: _write(conn, ops))

    def failed(self, exc: Exception) -> Exception:
        """A ``StoreError`` (``OneConnection.run`` has described it already) as it is; anything else
        as the link describes it."""
        if isinstance(exc, StoreError):
            return exc
        error = self._link.failed(exc)
        error.__cause__ = exc
        return error

    def close(self) -> None:
        """Close the lanes' connections (once the writer has stopped)."""
        for conn in self._conns:
            conn.close()


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
