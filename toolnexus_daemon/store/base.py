"""The store protocol: typed tables of JSON records and one atomic ``commit``.

The engine owns the shape of runtime, handle and checkpoint records; the store
owns keys, the format-version envelope and atomicity. Everything one state
change touches — records, transcript messages, the request index, events — is
one ``Batch`` and lands in one write transaction, or not at all.

Tables (all keyed under a runtime id):
  runtimes     runtime_id                    -> runtime record
  handles      (runtime_id, handle_id)       -> handle record
  (handle_index: what ``handles_to_recover`` and ``census`` read, kept by the store with every handle write)
  (expiries: what ``expiring`` reads, kept the same way)
  messages     (runtime_id, handle_id, idx)  -> one transcript message (append per message)
  checkpoints  (runtime_id, handle_id)       -> the step checkpoint of a handle's open turn
  requests     (runtime_id, request_id)      -> request-index entry
  events       (runtime_id, seq)             -> Event
  versions     (runtime_id, version key)     -> one registry version (``engine.versions``), stored
                                                once per distinct registry, never per handle
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from ..model import JSON, Event

HandleKey = tuple[str, str]
T = TypeVar("T")


def lane_of(runtime_id: str, lanes: int) -> int:
    """The commit lane a runtime starts in among ``lanes`` (``Store.commit_lanes``); the committer
    moves it to the least-loaded lane whenever none of its commits is in flight."""
    return zlib.crc32(runtime_id.encode()) % max(lanes, 1)


@dataclass(frozen=True)
class Fence:
    """A commit's condition in a cluster: ``owner``'s process ``incarnation`` still holds the lease
    of ``runtime_id`` at ``epoch``. Checked in the commit's own transaction; a store of one daemon
    (LMDB, memory) has no leases and ignores it."""

    runtime_id: str
    owner: str
    epoch: int
    incarnation: str = ""


@dataclass
class Batch:
    """Every write of one state change. ``None`` values delete."""

    runtimes: dict[str, JSON | None] = field(default_factory=dict)
    handles: dict[HandleKey, JSON | None] = field(default_factory=dict)
    # (runtime_id, handle_id, index, message)
    messages: list[tuple[str, str, int, JSON]] = field(default_factory=list)
    # (runtime_id, handle_id, first index to drop): drops that message and every later one
    truncate: list[tuple[str, str, int]] = field(default_factory=list)
    checkpoints: dict[HandleKey, JSON | None] = field(default_factory=dict)
    requests: dict[HandleKey, JSON | None] = field(default_factory=dict)
    # registry versions by (runtime_id, version key): ``engine.versions.key_of``
    versions: dict[HandleKey, JSON | None] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    # (runtime_id, seq): drop every stored event of that runtime with a lower seq (event retention)
    drop_events: list[tuple[str, int]] = field(default_factory=list)
    # runtime ids whose every record (all tables) is deleted, before the puts above
    purge: list[str] = field(default_factory=list)
    # leases the batch is conditional on (PostgreSQL in a cluster): all must hold, or nothing lands
    fences: list[Fence] = field(default_factory=list)

    def is_empty(self) -> bool:
        return not (self.runtimes or self.handles or self.messages or self.truncate or self.checkpoints
                    or self.requests or self.versions or self.events or self.purge or self.drop_events)


@dataclass(frozen=True)
class HandleCensus:
    """One runtime's handles by state (root excluded) and its open suspensions by kind:
    ``kind -> (count, suspended_at of the oldest)`` (0 when the oldest record has no time)."""

    states: dict[str, int]
    open: dict[str, tuple[int, float]]


@dataclass(frozen=True, order=True)
class PendingRow:
    """One open suspension in the pending index: the leaf ``handle_id`` of ``runtime_id``, parked
    since ``since`` (seconds since the epoch). Rows come oldest first; equal ``since`` in an
    order of the store's own that never changes, so a row is also a page cursor."""

    since: float
    runtime_id: str
    handle_id: str


@dataclass(frozen=True)
class PendingQuery:
    """Which open suspensions ``Store.pending`` returns: of one runtime (None: all), of one kind
    (None: all), parked within ``[oldest, newest]`` (None: unbounded), strictly after the row
    ``after`` (a previous page's last), at most ``limit``."""

    runtime_id: str | None = None
    kind: str | None = None
    oldest: float | None = None
    newest: float | None = None
    after: PendingRow | None = None
    limit: int = 100


@dataclass(frozen=True)
class StoreInfo:
    path: str
    size_bytes: int
    map_size_bytes: int
    format_version: int


class Store(Protocol):
    """Durable tables with one atomic commit. Reads are synchronous; a request path makes them
    through ``read``, which keeps a read that waits on a network (PostgreSQL) off the event loop.
    Calling them directly is for start-up, recovery and a handle cache miss."""

    @property
    def commit_lanes(self) -> int:
        """How many commits may be in flight at once, each in its own ``lane`` (PostgreSQL: a
        connection each; LMDB and memory: 1, one writer)."""
        ...

    async def commit(self, batch: Batch, lane: int = 0) -> None:
        """Apply ``batch`` atomically (and durably, if the store syncs).

        Commits of one lane (``0 <= lane < commit_lanes``; others wrap) apply in the order they
        were called; commits of different lanes may overlap and land in either order, so a
        caller keeps a runtime's commits in one lane while any of them is in flight. Raises ``StoreFull``
        when the map or disk is full (nothing of the batch is kept) and ``StoreError`` for any
        other failure.
        """

    async def read(self, work: Callable[[Store], T]) -> T:
        """``work(store)`` off the event loop where a read waits on a network: the way every read on
        a request path is made. ``work`` calls the synchronous reads below (one or several: they
        share one hop). PostgreSQL runs it on one of a bounded set of reader threads, each with its
        own connection, so reads of many runtimes overlap and none holds the event loop for a round
        trip; LMDB and memory read in microseconds from memory-mapped pages or dicts, where a
        thread hop would cost more than the read, so they run it inline."""
        ...

    def runtime_ids(self) -> list[str]: ...

    def get_runtime(self, runtime_id: str) -> JSON | None: ...

    def handles(self, runtime_id: str) -> list[JSON]:
        """Every handle record of a runtime, in key order."""

    def handles_to_recover(self, runtime_id: str) -> list[str]:
        """Ids of the handles a start must look at (``summary.needs_recovery``), in key order."""

    def census(self, runtime_id: str) -> HandleCensus:
        """Counts kept with every handle write: reading them costs the same at any number of handles."""

    def pending(self, query: PendingQuery) -> list[PendingRow]:
        """Open suspensions oldest first, read from an index: a page costs the same at any number
        of parked handles (a filter by runtime or kind is an index of its own, never a skip)."""
    def expiring(self, runtime_id: str, limit: int) -> list[tuple[float, str]]:
        """The open suspensions with an ``expires_at`` (``expiry.expiry_of``) as (expires, leaf handle
        id), soonest first, at most ``limit``: an index kept with every handle write, never a scan."""

    def get_handle(self, runtime_id: str, handle_id: str) -> JSON | None: ...

    def get_handles(self, keys: list[HandleKey]) -> list[JSON | None]:
        """The records of ``keys`` in their order (None where absent), in one read: a page of
        ``ListPending`` costs one round trip to PostgreSQL, not one per item."""

    def messages(self, runtime_id: str, handle_id: str, start: int = 0, end: int | None = None) -> list[JSON]:
        """Transcript messages with ``start <= index < end`` in index order."""

    def get_checkpoint(self, runtime_id: str, handle_id: str) -> JSON | None: ...

    def get_request(self, runtime_id: str, request_id: str) -> JSON | None: ...

    def get_version(self, runtime_id: str, version_key: str) -> JSON | None:
        """One stored registry version of a runtime (None when absent)."""

    def versions(self, runtime_id: str) -> list[JSON]:
        """Every stored registry version of a runtime, in key order (oldest first)."""

    def events(self, runtime_id: str, after_seq: int = 0, limit: int = 1000,
               max_bytes: int | None = None) -> list[Event]:
        """Stored events with ``seq > after_seq``, ascending, at most ``limit``; with ``max_bytes``,
        no more once the stored records read reach that many bytes (always at least one event), so
        a page of large events is bounded by what it holds, not by its count."""

    def last_seq(self, runtime_id: str) -> int:
        """The highest stored seq of a runtime, 0 if none."""

    def info(self) -> StoreInfo: ...

    def close(self) -> None:
        """Flush and release the store (and its data-directory lock)."""
