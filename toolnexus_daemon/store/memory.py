"""The in-memory ``Store``: what engine unit tests run on.

Records are kept as the same compact JSON the LMDB store writes, so a put and
every get hand out fresh copies (no caller can alias a stored record) and a
record LMDB could not encode fails here too. Ids go through the same key rules
as LMDB's (``codec.id_bytes``), and ordering matches it: Python orders strings
by code point, which is UTF-8 byte order. A commit encodes the whole batch
before changing anything, so a failing batch leaves nothing behind.
``fail_next_commit`` lets a test make the next commit fail the way a full map does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from ..errors import StoreError
from ..model import JSON, Event
from . import codec
from .base import Batch, HandleCensus, HandleKey, PendingQuery, PendingRow, Store, StoreInfo, T
from .codec import FORMAT_VERSION, Table
from .expiry import expiry_of, micros
from .summary import contribution, summarize

Encoded = bytes | None  # None deletes
K = TypeVar("K")


@dataclass
class _Staged:
    """A batch already validated and encoded; applying it cannot fail."""

    purge: list[str]
    runtimes: dict[str, Encoded]
    handles: dict[HandleKey, Encoded]
    truncate: list[tuple[str, str, int]]
    messages: list[tuple[str, str, int, bytes]]
    checkpoints: dict[HandleKey, Encoded]
    requests: dict[HandleKey, Encoded]
    versions: dict[HandleKey, Encoded]
    events: list[tuple[str, int, bytes]]
    drop_events: list[tuple[str, int]]


class MemoryStore:
    """The ``Store`` protocol over dicts. Nothing survives the process."""

    def __init__(self) -> None:
        self._runtimes: dict[str, bytes] = {}
        self._handles: dict[HandleKey, bytes] = {}
        self._messages: dict[HandleKey, dict[int, bytes]] = {}
        self._checkpoints: dict[HandleKey, bytes] = {}
        self._requests: dict[HandleKey, bytes] = {}
        self._versions: dict[HandleKey, bytes] = {}
        self._events: dict[str, dict[int, bytes]] = {}
        self._fail_next: StoreError | None = None
        self._closed = False

    def fail_next_commit(self, error: StoreError) -> None:
        """Make the next ``commit`` raise ``error`` and keep nothing of its batch (test hook)."""
        self._fail_next = error

    async def read(self, work: Callable[[Store], T]) -> T:
        """Inline: a read here costs microseconds, less than any hop off the loop."""
        return work(self)

    # one writer: every commit, of any lane, applies in call order
    commit_lanes = 1

    async def commit(self, batch: Batch, lane: int = 0) -> None:
        """Apply ``batch`` at once, then yield once, as a commit on a writer thread would."""
        self._check_open()
        if self._fail_next is not None:
            error, self._fail_next = self._fail_next, None
            raise error
        self._apply(_stage(batch))
        await asyncio.sleep(0)

    def _apply(self, s: _Staged) -> None:
        for rid in s.purge:
            self._purge(rid)
        _merge(self._runtimes, s.runtimes)
        _merge(self._handles, s.handles)
        for rid, hid, first in s.truncate:
            log = self._messages.get((rid, hid), {})
            for index in [i for i in log if i >= first]:
                del log[index]
        for rid, hid, index, message in s.messages:
            self._messages.setdefault((rid, hid), {})[index] = message
        _merge(self._checkpoints, s.checkpoints)
        _merge(self._requests, s.requests)
        _merge(self._versions, s.versions)
        for rid, seq, event in s.events:
            self._events.setdefault(rid, {})[seq] = event
        for rid, below in s.drop_events:
            log = self._events.get(rid, {})
            for seq in [q for q in log if q < below]:
                del log[seq]

    def _purge(self, runtime_id: str) -> None:
        self._runtimes.pop(runtime_id, None)
        self._events.pop(runtime_id, None)
        for table in (self._handles, self._messages, self._checkpoints, self._requests, self._versions):
            for key in [k for k in table if k[0] == runtime_id]:
                del table[key]

    # ------------------------------------------------------------------- reads

    def runtime_ids(self) -> list[str]:
        self._check_open()
        return sorted(self._runtimes)

    def get_runtime(self, runtime_id: str) -> JSON | None:
        return self._get(Table.RUNTIMES, runtime_id, self._runtimes.get(runtime_id))

    def handles(self, runtime_id: str) -> list[JSON]:
        self._check_open()
        found = sorted((hid, raw) for (rid, hid), raw in self._handles.items() if rid == runtime_id)
        return [_load(Table.HANDLES, f"{runtime_id}/{hid}", raw) for hid, raw in found]

    def handles_to_recover(self, runtime_id: str) -> list[str]:
        """Derived from every record on each call: what LMDB's index must hold."""
        return [str(rec["id"]) for rec in self.handles(runtime_id) if contribution(summarize(rec)).recover]

    def census(self, runtime_id: str) -> HandleCensus:
        """Counted from every record on each call: the reference LMDB's incremental counts must match."""
        states: dict[str, int] = {}
        open_by_kind: dict[str, tuple[int, float]] = {}
        for rec in self.handles(runtime_id):
            c = contribution(summarize(rec))
            if c.state is not None:
                states[c.state] = states.get(c.state, 0) + 1
            if c.open_kind is not None:
                n, oldest = open_by_kind.get(c.open_kind, (0, c.since))
                open_by_kind[c.open_kind] = (n + 1, min(oldest, c.since))
        return HandleCensus(states=states, open=open_by_kind)

    def pending(self, query: PendingQuery) -> list[PendingRow]:
        """Derived from every record on each call (ties by runtime id, then handle id): the reference
        the indexed stores must match."""
        self._check_open()
        rows = []
        for (rid, hid), raw in self._handles.items():
            if query.runtime_id is not None and rid != query.runtime_id:
                continue
            c = contribution(summarize(_load(Table.HANDLES, f"{rid}/{hid}", raw)))
            row = PendingRow(c.since, rid, hid)
            if c.open_kind is not None and _wanted(query, c.open_kind, row):
                rows.append(row)
        return sorted(rows)[:max(query.limit, 0)]
    def expiring(self, runtime_id: str, limit: int) -> list[tuple[float, str]]:
        """Derived from every record on each call: what the indexes of LMDB and PostgreSQL must hold."""
        rows = [(micros(when), str(rec["id"])) for rec in self.handles(runtime_id)
                if (when := expiry_of(rec)) is not None]
        return [(us / 1e6, hid) for us, hid in sorted(rows)[:max(limit, 0)]]

    def get_handle(self, runtime_id: str, handle_id: str) -> JSON | None:
        raw = self._handles.get((runtime_id, handle_id))
        return self._get(Table.HANDLES, f"{runtime_id}/{handle_id}", raw)

    def get_handles(self, keys: list[HandleKey]) -> list[JSON | None]:
        return [self.get_handle(rid, hid) for rid, hid in keys]

    def messages(self, runtime_id: str, handle_id: str, start: int = 0, end: int | None = None) -> list[JSON]:
        self._check_open()
        log = self._messages.get((runtime_id, handle_id), {})
        wanted = sorted(i for i in log if i >= start and (end is None or i < end))
        return [_load(Table.MESSAGES, f"{runtime_id}/{handle_id}/{i}", log[i]) for i in wanted]

    def get_checkpoint(self, runtime_id: str, handle_id: str) -> JSON | None:
        raw = self._checkpoints.get((runtime_id, handle_id))
        return self._get(Table.CHECKPOINTS, f"{runtime_id}/{handle_id}", raw)

    def get_request(self, runtime_id: str, request_id: str) -> JSON | None:
        raw = self._requests.get((runtime_id, request_id))
        return self._get(Table.REQUESTS, f"{runtime_id}/{request_id}", raw)

    def get_version(self, runtime_id: str, version_key: str) -> JSON | None:
        raw = self._versions.get((runtime_id, version_key))
        return self._get(Table.VERSIONS, f"{runtime_id}/{version_key}", raw)

    def versions(self, runtime_id: str) -> list[JSON]:
        self._check_open()
        found = sorted((key, raw) for (rid, key), raw in self._versions.items() if rid == runtime_id)
        return [_load(Table.VERSIONS, f"{runtime_id}/{key}", raw) for key, raw in found]

    def events(self, runtime_id: str, after_seq: int = 0, limit: int = 1000,
               max_bytes: int | None = None) -> list[Event]:
        self._check_open()
        log = self._events.get(runtime_id, {})
        seqs = sorted(s for s in log if s > after_seq)[:max(limit, 0)]
        if max_bytes is not None:
            seqs = seqs[:within_bytes([len(log[s]) for s in seqs], max_bytes)]
        return [_load_event(f"{runtime_id}/{s}", log[s]) for s in seqs]

    def last_seq(self, runtime_id: str) -> int:
        self._check_open()
        return max(self._events.get(runtime_id, {}), default=0)

    def info(self) -> StoreInfo:
        self._check_open()
        tables: list[Iterable[bytes]] = [self._runtimes.values(), self._handles.values(),
                                         self._checkpoints.values(), self._requests.values(),
                                         self._versions.values(),
                                         *(m.values() for m in self._messages.values()),
                                         *(e.values() for e in self._events.values())]
        size = sum(len(raw) for table in tables for raw in table)
        return StoreInfo(path=":memory:", size_bytes=size, map_size_bytes=0, format_version=FORMAT_VERSION)

    def close(self) -> None:
        self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("store :memory: is closed")

    def _get(self, table: Table, where: str, raw: bytes | None) -> JSON | None:
        self._check_open()
        return None if raw is None else _load(table, where, raw)


def _wanted(query: PendingQuery, kind: str, row: PendingRow) -> bool:
    return ((query.kind is None or kind == query.kind)
            and (query.oldest is None or row.since >= query.oldest)
            and (query.newest is None or row.since <= query.newest)
            and (query.after is None or row > query.after))


def _stage(batch: Batch) -> _Staged:
    """Validate every id and encode every record of ``batch``; raises ``StoreError`` before any change."""
    for rid in batch.purge:
        codec.runtime_key(rid)
    for rid, hid, first in batch.truncate:
        codec.message_key(rid, hid, first)
    return _Staged(
        purge=list(batch.purge),
        runtimes={r: _dump(Table.RUNTIMES, codec.runtime_key(r), rec) for r, rec in batch.runtimes.items()},
        handles=_pairs(Table.HANDLES, batch.handles),
        truncate=list(batch.truncate),
        messages=[(rid, hid, i, _dump_message(rid, hid, i, msg)) for rid, hid, i, msg in batch.messages],
        checkpoints=_pairs(Table.CHECKPOINTS, batch.checkpoints),
        requests=_pairs(Table.REQUESTS, batch.requests),
        versions=_pairs(Table.VERSIONS, batch.versions),
        events=[(e.runtime_id, e.seq, _dump_event(e)) for e in batch.events],
        drop_events=list(batch.drop_events),
    )


def _pairs(table: Table, records: Mapping[HandleKey, JSON | None]) -> dict[HandleKey, Encoded]:
    return {key: _dump(table, codec.pair_key(*key), rec) for key, rec in records.items()}


def _dump(table: Table, key: bytes, record: JSON | None) -> Encoded:
    return None if record is None else codec.dump_json(f"{table}/{codec.describe_key(table, key)}", record)


def _dump_message(rid: str, hid: str, index: int, message: JSON) -> bytes:
    codec.message_key(rid, hid, index)
    return codec.dump_json(f"{Table.MESSAGES}/{rid}/{hid}/{index}", message)


def _dump_event(event: Event) -> bytes:
    codec.event_key(event.runtime_id, event.seq)
    return codec.dump_json(f"{Table.EVENTS}/{event.runtime_id}/{event.seq}", event.to_json())


def _load(table: Table, where: str, raw: bytes) -> JSON:
    return codec.load_json(f"{table}/{where}", raw)


def _load_event(where: str, raw: bytes) -> Event:
    return codec.event_from_json(f"{Table.EVENTS}/{where}", _load(Table.EVENTS, where, raw))


def _merge(table: dict[K, bytes], changes: Mapping[K, Encoded]) -> None:
    for key, raw in changes.items():
        if raw is None:
            table.pop(key, None)
        else:
            table[key] = raw


def within_bytes(sizes: list[int], max_bytes: int) -> int:
    """How many of the records sized ``sizes`` a page of ``max_bytes`` takes (at least one): records
    are taken while the ones before stay under the budget."""
    held = 0
    for n, size in enumerate(sizes):
        if n and held >= max_bytes:
            return n
        held += size
    return len(sizes)
