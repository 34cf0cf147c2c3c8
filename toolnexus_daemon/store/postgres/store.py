"""The ``Store`` protocol on PostgreSQL: the same contract as LMDB on a database many daemons can reach.

Commits go through ``lanes.AsyncLanes``: ``COMMIT_LANES`` lanes, each an asynchronous
connection the event loop drives itself, one database transaction (one round trip) per
batch, in call order within its lane, so the event loop never waits on a COMMIT and the
transactions of runtimes in different lanes overlap; the engine's committer has already
grouped the changes behind each (per lane, ``base.lane_of``). The batch becomes its SQL
(``write.prepare``) on the caller's thread before the first await, as on LMDB.

Reads are synchronous, as the protocol wants: each is one indexed query on an
autocommit connection (so it sees every committed change). Made through ``read``
(every request path), they run on one of ``READ_CONNECTIONS`` reader threads, each
with its own connection, so reads overlap and none holds the event loop for a
round trip; called directly on the thread that opened the store (start-up,
recovery, a handle cache miss on the event loop), they use the store's own
connection; any other thread (``ListPending`` pages on a worker thread) gets a
connection of its own, so it never holds a lock the event loop waits on. Values
are LMDB's envelope bytes, so ``codec`` decodes them and names a damaged row's
table and key exactly as LMDB does.

Errors are translated at this edge (``link.Link.failed``): a refused or lost
connection is ``StoreUnavailable`` (UNAVAILABLE, naming the database) and starts
the reconnect prober; a value too large or a full disk is ``StoreFull``
(RESOURCE_EXHAUSTED); anything else ``StoreError``.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import cast

import psycopg

from ...errors import StoreError
from ...model import JSON, Event
from .. import codec
from ..base import Batch, HandleCensus, HandleKey, PendingQuery, PendingRow, Store, StoreInfo, T
from ..codec import FORMAT_VERSION, Table
from ..writer import WriterStats
from . import pending, schema
from .lanes import AsyncLanes
from .link import Link, OneConnection
from .write import prepare

log = logging.getLogger("toolnexus_daemon.store")
# commit lanes (a connection each, ``lanes``), each committing its transactions in order: at a few ms
# to the database a transaction is a round trip, so lanes are what lets the commits of many runtimes
# overlap. Two, not more: a transaction costs the daemon CPU (about 0.3 ms since the lanes run on
# the event loop, a statement per table) and the server a WAL flush, and an idle lane takes a change
# alone where a busy one groups it with others: 3 and 4 lanes made 3.2-4.9 transactions per cycle
# against 2.1-2.5 and were no faster at 1 or 3 ms (bench/README.md, "PostgreSQL a network away")
COMMIT_LANES = 2
# reader threads (a connection each) serving ``read``: how many reads may be in flight at once; more
# wait their turn in the executor's queue, off the event loop
READ_CONNECTIONS = 4
Conn = psycopg.Connection[tuple[object, ...]]


class PgStore:
    """The ``Store`` protocol over one PostgreSQL database; opening migrates its schema."""

    def __init__(self, dsn: str, *, password: str | None = None, sync: bool = True,
                 commit_lanes: int = COMMIT_LANES, read_connections: int = READ_CONNECTIONS) -> None:
        """Any number of daemons may open one database: each runtime's writes are fenced by its
        lease (``lease``), which every daemon on PostgreSQL holds for the runtimes it serves."""
        self.link = Link(dsn, password=password, sync=sync)
        self._lock = threading.Lock()
        self._conn = OneConnection(self.link)
        try:
            before, after = self._conn.run(lambda conn: schema.migrate(conn, self.link.name))
        except BaseException:
            self._conn.close()
            raise
        if before == 0:
            log.info("store schema created", extra={"store": self.link.redacted, "version": after})
        elif before != after:
            log.warning("store schema migrated", extra={"store": self.link.redacted, "from_version": before,
                                                        "to_version": after})
        self._size = 0
        self.commit_lanes = max(commit_lanes, 1)
        self._lanes = AsyncLanes(self.link, self.commit_lanes)
        self._closed = False
        self._readers = ThreadPoolExecutor(max(read_connections, 1), thread_name_prefix="pg-read")
        self._local = threading.local()  # a reader (or worker) thread's own connection
        self._home = threading.current_thread()
        self._reader_conns: list[OneConnection] = []
        self._conns_lock = threading.Lock()

    # ------------------------------------------------------------------ writes

    async def commit(self, batch: Batch, lane: int = 0) -> None:
        """Apply ``batch`` in one transaction on ``lane`` (others wrap); return once it is committed.

        As on LMDB (``writer.Writer.commit``): encoded and queued before the first await (which
        fixes its order in its lane), and run to completion even if the awaiting task is cancelled.
        While the database is down it fails at once, naming it, instead of queueing."""
        if self._closed:
            raise StoreError(f"store {self.link.redacted} is closed")
        steps = prepare(batch)
        if not steps:
            return
        if not self.link.up:
            raise self.link.unavailable()
        done = self._lanes.submit(lane, steps)
        done.add_done_callback(_retrieve_exception)
        await asyncio.shield(done)

    def stats(self) -> WriterStats:
        return self._lanes.stats()

    # ------------------------------------------------------------------- reads

    async def read(self, work: Callable[[Store], T]) -> T:
        """``work(self)`` on a reader thread and its own connection; the event loop waits for nothing."""
        if self._closed:
            raise StoreError(f"store {self.link.redacted} is closed")
        return await asyncio.get_running_loop().run_in_executor(self._readers, work, self)

    def _thread_connection(self) -> OneConnection:
        """The calling thread's own connection (a reader thread's, or a worker thread's reading a
        page for ``ListPending``), opened on its first query and closed with the store."""
        conn: OneConnection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = OneConnection(self.link)
            with self._conns_lock:  # not the store connection's lock: a query may hold that one
                self._reader_conns.append(conn)
            self._local.conn = conn
        return conn

    def runtime_ids(self) -> list[str]:
        return [str(r[0]) for r in self._query("SELECT rid FROM tn_runtimes ORDER BY rid")]

    def get_runtime(self, runtime_id: str) -> JSON | None:
        return self._one(Table.RUNTIMES, "SELECT rid, value FROM tn_runtimes WHERE rid = %s", runtime_id)

    def handles(self, runtime_id: str) -> list[JSON]:
        rows = self._query("SELECT hid, value FROM tn_handles WHERE rid = %s ORDER BY hid", runtime_id)
        return [_decode(Table.HANDLES, codec.pair_key(runtime_id, str(h)), v) for h, v in rows]

    def handles_to_recover(self, runtime_id: str) -> list[str]:
        rows = self._query("SELECT hid FROM tn_handles WHERE rid = %s AND recover ORDER BY hid", runtime_id)
        return [str(r[0]) for r in rows]

    def census(self, runtime_id: str) -> HandleCensus:
        states = self._query("SELECT state, count(*) FROM tn_handles WHERE rid = %s AND state IS NOT NULL "
                             "GROUP BY state", runtime_id)
        opened = self._query("SELECT open_kind, count(*), min(since) FROM tn_handles "
                             "WHERE rid = %s AND open_kind IS NOT NULL GROUP BY open_kind", runtime_id)
        return HandleCensus(states={str(s): int(cast(int, n)) for s, n in states},
                            open={str(k): (int(cast(int, n)), float(cast(float, m))) for k, n, m in opened})

    def pending(self, query: PendingQuery) -> list[PendingRow]:
        if query.limit <= 0:
            return []
        sql, params = pending.pending_sql(query)
        return pending.rows_of(self._query(sql, *params))
    def expiring(self, runtime_id: str, limit: int) -> list[tuple[float, str]]:
        rows = self._query("SELECT expires, hid FROM tn_handles WHERE rid = %s AND expires IS NOT NULL "
                           "ORDER BY expires, hid LIMIT %s", runtime_id, max(limit, 0))
        return [(float(cast(float, e)), str(h)) for e, h in rows]

    def get_handle(self, runtime_id: str, handle_id: str) -> JSON | None:
        return self._one(Table.HANDLES, "SELECT rid, value FROM tn_handles WHERE rid = %s AND hid = %s",
                         runtime_id, handle_id)

    def get_handles(self, keys: list[HandleKey]) -> list[JSON | None]:
        """One query for every key, answered in ``keys``' order. A LATERAL lookup per key (kept a
        subquery by its LIMIT) is a primary-key probe whatever plan a prepared statement cached
        while the table was small: a plain join of the key list was cached as a scan of the whole
        table, 20 ms a page once 100,000 handles were parked."""
        if not keys:
            return []
        rows = self._query("SELECT k.rid, k.hid, h.value FROM unnest(%s::text[], %s::text[]) AS k(rid, hid) "
                           "JOIN LATERAL (SELECT value FROM tn_handles t "
                           "WHERE t.rid = k.rid AND t.hid = k.hid LIMIT 1) h ON true",
                           [rid for rid, _ in keys], [hid for _, hid in keys])
        found = {(str(rid), str(hid)): value for rid, hid, value in rows}
        return [None if (raw := found.get(key)) is None
                else _decode(Table.HANDLES, codec.pair_key(key[0], key[1]), raw) for key in keys]

    def messages(self, runtime_id: str, handle_id: str, start: int = 0, end: int | None = None) -> list[JSON]:
        if end is not None and end <= start:
            return []
        rows = self._query("SELECT idx, value FROM tn_messages WHERE rid = %s AND hid = %s AND idx >= %s "
                           "AND (%s::bigint IS NULL OR idx < %s) ORDER BY idx",
                           runtime_id, handle_id, max(start, 0), end, end)
        return [_decode(Table.MESSAGES, codec.message_key(runtime_id, handle_id, int(cast(int, i))), v)
                for i, v in rows]

    def get_checkpoint(self, runtime_id: str, handle_id: str) -> JSON | None:
        return self._one(Table.CHECKPOINTS,
                         "SELECT rid, value FROM tn_checkpoints WHERE rid = %s AND hid = %s",
                         runtime_id, handle_id)

    def get_request(self, runtime_id: str, request_id: str) -> JSON | None:
        return self._one(Table.REQUESTS, "SELECT rid, value FROM tn_requests WHERE rid = %s AND qid = %s",
                         runtime_id, request_id)

    def get_version(self, runtime_id: str, version_key: str) -> JSON | None:
        return self._one(Table.VERSIONS, "SELECT rid, value FROM tn_versions WHERE rid = %s AND vid = %s",
                         runtime_id, version_key)

    def versions(self, runtime_id: str) -> list[JSON]:
        rows = self._query("SELECT vid, value FROM tn_versions WHERE rid = %s ORDER BY vid", runtime_id)
        return [_decode(Table.VERSIONS, codec.pair_key(runtime_id, str(k)), v) for k, v in rows]

    def events(self, runtime_id: str, after_seq: int = 0, limit: int = 1000,
               max_bytes: int | None = None) -> list[Event]:
        if limit <= 0:
            return []
        if max_bytes is None:
            rows = self._query("SELECT seq, value FROM tn_events WHERE rid = %s AND seq > %s "
                               "ORDER BY seq LIMIT %s", runtime_id, max(after_seq, 0), limit)
        else:  # a running sum of the values' sizes (no value is read to size it) cuts the page
            rows = self._query("SELECT seq, value FROM (SELECT seq, value, sum(octet_length(value)) "
                               "OVER (ORDER BY seq) - octet_length(value) AS before FROM tn_events "
                               "WHERE rid = %s AND seq > %s ORDER BY seq LIMIT %s) page "
                               "WHERE before = 0 OR before < %s ORDER BY seq",
                               runtime_id, max(after_seq, 0), limit, max_bytes)
        return [codec.decode_event(codec.event_key(runtime_id, int(cast(int, s))), bytes(cast(bytes, v)))
                for s, v in rows]

    def last_seq(self, runtime_id: str) -> int:
        rows = self._query("SELECT max(seq) FROM tn_events WHERE rid = %s", runtime_id)
        return int(cast(int, rows[0][0])) if rows and rows[0][0] is not None else 0

    def info(self) -> StoreInfo:
        """Size of the database; during an outage, the last size read (Info keeps answering)."""
        if self._closed:
            raise StoreError(f"store {self.link.redacted} is closed")
        if self.link.up:
            try:
                self._size = int(cast(int, self._query("SELECT pg_database_size(current_database())")[0][0]))
            except StoreError:
                pass
        return StoreInfo(path=self.link.redacted, size_bytes=self._size, map_size_bytes=0,
                         format_version=FORMAT_VERSION)

    def close(self) -> None:
        """Close every connection: the commit lanes' (the daemon closes the store once its event loop
        has stopped, after the engine stopped its turns; a commit still running then fails and keeps
        nothing), the store's own and the reader threads'."""
        if self._closed:
            return
        self._closed = True
        self._lanes.close()
        self._readers.shutdown(wait=True)
        self.link.close()
        with self._lock:
            self._conn.close()
        with self._conns_lock:
            for conn in self._reader_conns:
                conn.close()

    # ----------------------------------------------------------------- helpers

    def _query(self, sql: str, *params: object) -> list[tuple[object, ...]]:
        if self._closed:
            raise StoreError(f"store {self.link.redacted} is closed")
        if threading.current_thread() is not self._home:  # a reader or worker thread: its own connection
            own = self._thread_connection()
            return own.run(lambda conn: conn.execute(sql.encode(), params).fetchall())
        # the thread that opened the store (the event loop's): a direct read, on the store's connection;
        # the lock only guards against a close racing it
        with self._lock:
            return self._conn.run(lambda conn: conn.execute(sql.encode(), params).fetchall())

    def _one(self, table: Table, sql: str, *ids: str) -> JSON | None:
        key = codec.runtime_key(ids[0]) if len(ids) == 1 else codec.pair_key(ids[0], ids[1])
        rows = self._query(sql, *ids)
        return _decode(table, key, rows[0][1]) if rows else None


def _retrieve_exception(task: asyncio.Future[None]) -> None:
    """Mark a shielded commit's failure as seen when its caller was cancelled and never awaits it."""
    if not task.cancelled():
        task.exception()


def _decode(table: Table, key: bytes, raw: object) -> JSON:
    return codec.decode_value(table, key, bytes(cast(bytes, raw)))

