"""LMDB's writer: commit lanes, each one thread writing one batch per transaction in call order,
and the hand-over from the event loop that a cancelled caller cannot undo. (PostgreSQL's lanes
keep the same promises on the event loop itself, ``postgres.lanes``: a thread there cost a
transaction two hand-offs of the GIL while the database was a round trip away.)

What it holds is everything around a transaction: the batch is turned into
the backend's operations on the caller's thread when ``commit`` is called (which snapshots it
— the caller may reuse its dicts at once — surfaces a bad id or record before any transaction,
and fixes its place in its lane's order); a lane's thread applies its batches one
transaction each, in call order, and a batch's caller is answered only once that transaction
has committed (a failed one kept nothing); a cancelled caller still has its batch written, so
a commit is never left half-decided; a failure the backend cannot describe still answers the
caller and never kills the thread. Grouping is not done here: the engine's committer already
hands over one batch per group, of every runtime queued behind the previous commit.

The backend's own I/O is the four methods of ``Backend``: its form of a batch (LMDB:
byte-level puts and range drops with the handle indexes), one transaction of a lane (an LMDB
write transaction), what a failure means to the caller (``StoreFull`` …), and whether commits
are taken right now.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from ..errors import StoreError
from .base import Batch

Op = TypeVar("Op")


class Backend(Protocol[Op]):
    """A store's own I/O behind the shared writer; ``Op`` is one of its operations."""

    def prepare(self, batch: Batch) -> list[Op]:
        """``batch`` as operations in apply order (empty: nothing to write), on the caller's
        thread; raises ``StoreError`` for an id or record the store cannot hold."""
        ...

    def admit(self) -> None:
        """Raise when commits are refused right now (before the batch is queued)."""
        ...

    def transact(self, lane: int, ops: list[Op]) -> None:
        """Apply ``ops`` in one transaction on ``lane``'s thread; raise (keeping nothing) on failure."""
        ...

    def failed(self, exc: Exception) -> Exception:
        """What a failed transaction means to the batch's caller (``StoreFull``, ``StoreError`` …)."""
        ...


@dataclass(frozen=True)
class WriterStats:
    """What the writer did so far: ``transactions`` committed (one batch each), ``failed``
    transactions (nothing of them kept), and how many batches are ``queued`` right now."""

    transactions: int
    failed: int
    queued: int


class Writer(Generic[Op]):
    """``lanes`` writer threads over one ``Backend``; ``where`` names the store in errors."""

    def __init__(self, backend: Backend[Op], *, where: str, lanes: int = 1, name: str = "commit") -> None:
        self._backend, self._where = backend, where
        count = max(lanes, 1)
        self._lanes = [_Lane(_Transact(backend, i), backend.failed,
                             name=name if count == 1 else f"{name}-{i}") for i in range(count)]
        self._closed = False

    @property
    def lanes(self) -> int:
        return len(self._lanes)

    async def commit(self, batch: Batch, lane: int = 0) -> None:
        """Apply ``batch`` in one transaction on ``lane`` (others wrap); return once it is committed.

        Prepared and queued on the calling thread before the first await, which fixes its place
        in the lane's order; once queued it runs to completion even if the awaiting task is
        cancelled."""
        if self._closed:
            raise StoreError(f"store {self._where} is closed")
        ops = self._backend.prepare(batch)
        if not ops:
            return
        self._backend.admit()
        done = self._lanes[lane % len(self._lanes)].submit(ops)
        try:
            # a cancelled caller cancels only its own future: the lane writes the batch all the same
            await done
        except asyncio.CancelledError:
            if done.done() and not done.cancelled():
                done.exception()  # settled just before the cancel: its failure is seen, not logged as lost
            raise

    def stats(self) -> WriterStats:
        each = [lane.stats() for lane in self._lanes]
        return WriterStats(transactions=sum(s.transactions for s in each), failed=sum(s.failed for s in each),
                           queued=sum(s.queued for s in each))

    def close(self) -> None:
        """Refuse new commits, write every batch already queued, stop the threads. Safe to call twice."""
        self._closed = True
        for lane in self._lanes:
            lane.close()


@dataclass(frozen=True)
class _Transact(Generic[Op]):
    """One lane's transaction: the backend's ``transact`` with that lane's number."""

    backend: Backend[Op]
    lane: int

    def __call__(self, ops: list[Op]) -> None:
        self.backend.transact(self.lane, ops)


@dataclass
class _Queued(Generic[Op]):
    ops: list[Op]
    # the caller's future, settled on its event loop once the transaction is decided
    loop: asyncio.AbstractEventLoop
    done: asyncio.Future[None]


class _Lane(Generic[Op]):
    """The one thread of a lane: one batch per transaction, in call order.

    The hand-over is a ``queue.SimpleQueue`` (its put and get are C) and the caller's asyncio
    future, settled from the thread with ``call_soon_threadsafe``: a ``threading.Condition`` and a
    ``concurrent.futures.Future`` chained to an asyncio one cost several Python-level lock and
    callback steps per commit on the event loop's thread. ``None`` in the queue stops the thread."""

    def __init__(self, transact: Callable[[list[Op]], None], failed: Callable[[Exception], Exception], *,
                 name: str) -> None:
        self._transact, self._failed = transact, failed
        self._queue: queue.SimpleQueue[_Queued[Op] | None] = queue.SimpleQueue()
        # makes "not closing" and the put one step, so nothing is queued behind the stop
        self._lock = threading.Lock()
        self._closing = False
        # each written by one thread only: submitted by the callers', the rest by the lane's
        self._submitted = 0
        self._counts = [0, 0, 0]  # transactions, failed, taken
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, ops: list[Op]) -> asyncio.Future[None]:
        """Queue ``ops`` behind every batch submitted before; the future (of the running event
        loop) resolves once they are committed."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        with self._lock:
            if self._closing:
                raise StoreError("the store is closed")
            self._submitted += 1
            self._queue.put(_Queued(ops, loop, done))
        return done

    def stats(self) -> WriterStats:
        txns, failed, taken = self._counts
        return WriterStats(transactions=txns, failed=failed, queued=max(self._submitted - taken, 0))

    def close(self) -> None:
        with self._lock:
            if not self._closing:
                self._closing = True
                self._queue.put(None)
        if threading.current_thread() is not self._thread:
            self._thread.join()

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            self._counts[2] += 1
            self._write(item)

    def _write(self, item: _Queued[Op]) -> None:
        try:
            self._transact(item.ops)
        except Exception as exc:  # nothing of the batch was kept
            self._counts[1] += 1
            _settle(item, self._error_for(exc))
            return
        self._counts[0] += 1
        _settle(item, None)

    def _error_for(self, exc: Exception) -> Exception:
        """The caller's error; a backend that fails to describe it must not kill the thread."""
        try:
            return self._failed(exc)
        except Exception as mapping:
            return StoreError(f"store write failed: {exc!r} (and describing it failed: {mapping!r})")


def _settle(item: _Queued[Op], error: Exception | None) -> None:
    """Answer ``item``'s caller on its loop (a loop already closed has no caller left to answer)."""
    try:
        item.loop.call_soon_threadsafe(_set, item.done, error)
    except RuntimeError:  # the loop closed meanwhile; the lane's thread goes on with the next batch
        pass


def _set(done: asyncio.Future[None], error: Exception | None) -> None:
    if done.done():  # its caller was cancelled: the batch was written all the same
        return
    if error is None:
        done.set_result(None)
    else:
        done.set_exception(error)
