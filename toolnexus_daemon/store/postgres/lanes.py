"""PostgreSQL's commit lanes on the event loop: each lane one asynchronous connection, its
transactions in call order, none of them holding the loop for a round trip.

A lane's transaction is one pipeline ending in its only Sync (one round trip, ``write``),
sent and read by the event loop itself with libpq's pipeline calls on a connection psycopg
opened asynchronously: the loop writes the statements (prepared once per connection, their
parameters encoded by ``wire``), goes on with other work while the database answers, and
picks the answer up when the socket is readable: one wake-up of the loop per round trip,
where a psycopg cursor took a turn of the loop per statement. A writer thread per lane (the
shared ``writer.Writer``, as LMDB's) cost each transaction two hand-offs of the GIL (the
thread woken to send, the loop woken with the result), and a thread woken while the loop is
busy waits for the loop to let go of the GIL. Lanes cost no thread, so the transactions of
different lanes overlap as they did.

What the writer promised still holds: a batch is queued in its lane before the caller's
first await, so its place in the lane's order is fixed at call time; a lane runs one
transaction at a time, in that order; a caller is answered only once its transaction has
committed (a failed one kept nothing); a cancelled caller's batch is written all the same.
A connection opened before an outage is not reused after it, and one found dead after being
idle is tried once more on a fresh connection (every store write is an idempotent upsert or
delete), as ``link.OneConnection`` does for the threads. A lane is tied to the event loop
that first used it; used from another loop (a test's next ``asyncio.run``), it starts over
with a new connection.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

import psycopg
from psycopg import errors
from psycopg.pq import ExecStatus, TransactionStatus
from psycopg.pq.abc import PGconn

from ...errors import StoreError
from ..writer import WriterStats
from . import wire
from .link import Link, is_connection_error, is_retryable
from .write import SERIALIZATION_RETRIES, Step

AConn = psycopg.AsyncConnection[tuple[object, ...]]


@dataclass
class _Lane:
    """One lane's connection and the lock that keeps its transactions one at a time, in order."""

    loop: asyncio.AbstractEventLoop | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    conn: AConn | None = None
    generation: int = -1
    queued: int = 0
    # the statements prepared on ``conn`` (``wire``)
    prepared: set[bytes] = field(default_factory=set)


class AsyncLanes:
    """``lanes`` commit lanes of one database, each an asynchronous connection used by the loop."""

    def __init__(self, link: Link, lanes: int) -> None:
        self._link = link
        self._lanes = [_Lane() for _ in range(max(lanes, 1))]
        self._counts = [0, 0]  # transactions, failed
        self._closed = False

    @property
    def count(self) -> int:
        return len(self._lanes)

    def submit(self, lane: int, steps: list[Step]) -> asyncio.Task[None]:
        """Queue ``steps`` as one transaction of ``lane`` behind those submitted before; the task
        ends once it committed. Called on the event loop; the task is not the caller's, so a
        cancelled caller does not cancel the write."""
        if self._closed:
            raise StoreError(f"store {self._link.redacted} is closed")
        one = self._lane(lane % len(self._lanes))
        one.queued += 1
        # the lock is taken in the order the tasks first run, which is the order they were created
        return asyncio.get_running_loop().create_task(self._transact(one, steps), name="pg-commit")

    def stats(self) -> WriterStats:
        return WriterStats(transactions=self._counts[0], failed=self._counts[1],
                           queued=sum(lane.queued for lane in self._lanes))

    def close(self) -> None:
        """Close every lane's connection (once the loop that used them has stopped, or between
        commits); a transaction still running fails and keeps nothing."""
        self._closed = True
        for lane in self._lanes:
            _finish(lane)

    def _lane(self, index: int) -> _Lane:
        """Lane ``index``, started over when this is not the loop it was used on before."""
        loop = asyncio.get_running_loop()
        lane = self._lanes[index]
        if lane.loop is not loop:
            _finish(lane)
            lane = self._lanes[index] = _Lane(loop=loop)
        return lane

    async def _transact(self, lane: _Lane, steps: list[Step]) -> None:
        async with lane.lock:
            lane.queued -= 1
            try:
                await self._run(lane, steps)
            except BaseException:
                self._counts[1] += 1
                raise
            self._counts[0] += 1

    async def _run(self, lane: _Lane, steps: list[Step]) -> None:
        for attempt in (0, 1):
            conn, fresh = await self._connection(lane)
            try:
                return await write(conn.pgconn, steps, lane.prepared)
            except BaseException as exc:
                # a statement the server refused leaves the connection idle, its results read up to the
                # Sync; anything else (a lost connection, the loop going away mid-transaction, a bug)
                # may leave results owed or statements sent without their Sync: never reused
                if conn.closed or conn.broken or conn.pgconn.transaction_status != TransactionStatus.IDLE:
                    _finish(lane)
                if isinstance(exc, psycopg.Error):
                    if attempt == 0 and not fresh and is_connection_error(exc):
                        continue
                    raise self._link.failed(exc) from exc
                if isinstance(exc, Exception) and not isinstance(exc, StoreError):
                    raise StoreError(f"store write failed: {exc!r}") from exc  # the lane goes on
                raise

    async def _connection(self, lane: _Lane) -> tuple[AConn, bool]:
        conn = lane.conn
        if conn is not None and not conn.closed and lane.generation == self._link.generation:
            return conn, False
        _finish(lane)
        generation = self._link.generation
        conn = await self._link.connect_async()
        try:
            conn.pgconn.nonblocking = 1
            conn.pgconn.enter_pipeline_mode()  # for good: only ``write`` uses the connection
        except psycopg.Error as exc:
            conn.pgconn.finish()
            raise self._link.failed(exc) from exc
        lane.conn, lane.generation, lane.prepared = conn, generation, set()
        return conn, True


def _finish(lane: _Lane) -> None:
    """Close ``lane``'s connection without the loop (libpq's own close, which sends Terminate)."""
    conn, lane.conn = lane.conn, None
    lane.prepared = set()
    if conn is not None and not conn.closed:
        conn.pgconn.finish()


async def write(pgconn: PGconn, steps: Sequence[Step], prepared: set[bytes]) -> None:
    """One batch's ``steps`` in one transaction and one round trip on a connection in pipeline
    mode; a serialisation failure or deadlock runs the transaction again. ``prepared``: the
    statements this connection has prepared (those it lacks are prepared first, in the same
    round trip, and added).

    The connection is in autocommit mode and the statements go in one pipeline that ends in its
    only Sync: PostgreSQL runs everything before a Sync as one implicit transaction, committed at
    the Sync when every statement succeeded and rolled back otherwise. An explicit transaction
    would cost two more round trips (its BEGIN, its COMMIT)."""
    for attempt in range(SERIALIZATION_RETRIES + 1):
        try:
            return await _transact(pgconn, steps, prepared)
        except psycopg.Error as exc:
            if not is_retryable(exc) or attempt == SERIALIZATION_RETRIES:
                raise


async def _transact(pgconn: PGconn, steps: Sequence[Step], prepared: set[bytes]) -> None:
    """Send the transaction (after the statements it needs prepared, under a Sync of their own, so
    that a refused transaction leaves them prepared), flush, and read up to its Sync; the
    event loop waits for the socket in between, once per round trip."""
    missing: dict[bytes, wire.Statement] = {}
    sends: list[tuple[bytes, list[bytes | None], list[int]]] = []
    for sql, rows in steps:  # every parameter encoded before anything is sent
        st = wire.statement(sql)
        if st.name not in prepared:
            missing[st.name] = st
        sends += [(st.name, *st.params(row)) for row in rows]
    for st in missing.values():
        pgconn.send_prepare(st.name, st.query)
    if missing:
        pgconn.pipeline_sync()
    for name, params, formats in sends:
        pgconn.send_query_prepared(name, params, formats)
    pgconn.pipeline_sync()
    loop = asyncio.get_running_loop()
    while pgconn.flush():  # 1: more to send once the socket takes it
        await _ready(loop, pgconn, write=True)
    if missing:
        await _results(loop, pgconn)
        prepared.update(missing)
    await _results(loop, pgconn)


async def _results(loop: asyncio.AbstractEventLoop, pgconn: PGconn) -> None:
    """Read the results up to the next Sync; raise the first statement's error (the statements
    after it were skipped, and the transaction kept nothing)."""
    error: psycopg.Error | None = None
    for _ in range(1_000_000):  # bounded: a result per statement, then the Sync
        while pgconn.is_busy():
            await _ready(loop, pgconn, write=False)
            pgconn.consume_input()
        result = pgconn.get_result()
        if result is None:  # the end of one statement's results
            continue
        if result.status == ExecStatus.PIPELINE_SYNC:
            break
        if result.status == ExecStatus.FATAL_ERROR and error is None:
            error = errors.error_from_result(result, encoding="utf-8")
    if error is not None:
        raise error


async def _ready(loop: asyncio.AbstractEventLoop, pgconn: PGconn, *, write: bool) -> None:
    """Wait until the connection's socket can be written (or read)."""
    fd = pgconn.socket
    ready = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    (loop.add_writer if write else loop.add_reader)(fd, wake)
    try:
        await ready
    finally:
        (loop.remove_writer if write else loop.remove_reader)(fd)
