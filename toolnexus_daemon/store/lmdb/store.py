"""The durable store: one LMDB environment per data directory (docs/protocol.md §5).

Owns the environment, its named tables (see ``codec`` for keys and the value
envelope), the data-directory lock and the writer. Commits run on one writer
thread (the shared ``writer.Writer`` over ``write.LmdbWrites``), so the event
loop never waits on fsync and commits land in call order, one transaction per
batch; each caller is answered only once its transaction is durable. (The engine's committer groups
the changes of all runtimes queued behind a sync into one batch: grouping
happens there, once.) Reads are synchronous: each opens its own read transaction, which
LMDB serves from the map without blocking the writer. LMDB errors are
translated at the edge they cross: a failed write by ``write.LmdbWrites.failed``
(a full map or disk becomes ``StoreFull``; the transaction is aborted, so nothing
of the batch is kept), a failed read here; anything else is ``StoreError``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import lmdb

from ...errors import FormatTooNew, StoreError
from ...model import JSON, Event
from .. import codec
from ..base import Batch, HandleCensus, HandleKey, PendingQuery, PendingRow, Store, StoreInfo, T
from ..codec import FORMAT_VERSION, META_FORMAT_KEY, Table
from ..summary import Contribution, contribution, summarize
from ..writer import Writer, WriterStats
from . import expiry_index, handle_index, pending_index
from .datafile import check_data_file
from .dirlock import DirLock
from .write import LmdbWrites, Op

log = logging.getLogger("toolnexus_daemon.store")

class LmdbStore:
    """The ``Store`` protocol over LMDB. Opening takes the directory's lock or raises ``StoreLocked``."""

    def __init__(self, path: str | Path, *, map_size: int = 1 << 30, sync: bool = True) -> None:
        self._path = Path(path)
        try:
            self._path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create data directory {self._path}: {exc}") from exc
        with ExitStack() as undo:
            self._lock = DirLock(self._path)
            undo.callback(self._lock.release)
            self._env = _open_env(self._path, map_size, sync)
            undo.callback(self._env.close)
            self._dbs, self._format = _open_tables(self._env, self._path)
            undo.pop_all()
        self._writer: Writer[Op] = Writer(LmdbWrites(self._env, self._dbs, self._path),
                                          where=str(self._path), name="lmdb-commit")
        self._closed = False

    # ------------------------------------------------------------------ writes

    async def read(self, work: Callable[[Store], T]) -> T:
        """Inline: a read here costs microseconds, less than any hop off the loop."""
        return work(self)

    # one writer: every commit, of any lane, applies in call order
    commit_lanes = 1

    async def commit(self, batch: Batch, lane: int = 0) -> None:
        """Apply ``batch`` atomically on the writer thread; return once it is committed (and synced).

        The batch is encoded (and so snapshotted) and queued on the calling
        thread, before the first await, which is what fixes its place in the
        commit order. Once called, the commit runs to completion even if the
        awaiting task is cancelled, so a cancelled caller never leaves a commit
        half-decided (``writer.Writer.commit``).
        """
        await self._writer.commit(batch, lane)

    def stats(self) -> WriterStats:
        """Write transactions (one batch each) and refusals so far, and the batches queued now."""
        return self._writer.stats()

    # ------------------------------------------------------------------- reads

    def runtime_ids(self) -> list[str]:
        return [key.decode("utf-8") for key, _ in self._scan(Table.RUNTIMES, b"", b"")]

    def get_runtime(self, runtime_id: str) -> JSON | None:
        return self._get(Table.RUNTIMES, codec.runtime_key(runtime_id))

    def handles(self, runtime_id: str) -> list[JSON]:
        prefix = codec.runtime_prefix(runtime_id)
        return [codec.decode_value(Table.HANDLES, k, v) for k, v in self._scan(Table.HANDLES, prefix, prefix)]

    def handles_to_recover(self, runtime_id: str) -> list[str]:
        prefix = handle_index.recovery_prefix(runtime_id)
        rows = self._scan(Table.HANDLE_INDEX, prefix, prefix)
        return [key[len(prefix):].decode("utf-8") for key, _ in rows]

    def census(self, runtime_id: str) -> HandleCensus:
        counts = self._get(Table.HANDLE_INDEX, handle_index.census_key(runtime_id)) or {}
        states = {str(k): int(v) for k, v in dict(counts.get("states") or {}).items()}
        open_by_kind: dict[str, tuple[int, float]] = {}
        for kind, n in dict(counts.get("open") or {}).items():
            prefix = handle_index.suspension_prefix(runtime_id, str(kind))
            oldest = self._scan(Table.HANDLE_INDEX, prefix, prefix, limit=1)
            open_by_kind[str(kind)] = (int(n), handle_index.since_of(oldest[0][0]) if oldest else 0.0)
        return HandleCensus(states=states, open=open_by_kind)

    def pending(self, query: PendingQuery) -> list[PendingRow]:
        with self._reading() as env, env.begin() as txn:
            return pending_index.read(txn, self._dbs[Table.HANDLE_INDEX], query)
    def expiring(self, runtime_id: str, limit: int) -> list[tuple[float, str]]:
        prefix = expiry_index.due_prefix(runtime_id)
        rows = self._scan(Table.EXPIRIES, prefix, prefix, limit=max(limit, 0))
        return [expiry_index.row_of(bytes(k), bytes(v)) for k, v in rows]

    def get_handle(self, runtime_id: str, handle_id: str) -> JSON | None:
        return self._get(Table.HANDLES, codec.pair_key(runtime_id, handle_id))

    def get_handles(self, keys: list[HandleKey]) -> list[JSON | None]:
        """One read transaction for every key."""
        wanted = [codec.pair_key(rid, hid) for rid, hid in keys]
        with self._reading() as env, env.begin(db=self._dbs[Table.HANDLES]) as txn:
            raws = [txn.get(key) for key in wanted]
        return [None if raw is None else codec.decode_value(Table.HANDLES, key, raw)
                for key, raw in zip(wanted, raws, strict=True)]

    def messages(self, runtime_id: str, handle_id: str, start: int = 0, end: int | None = None) -> list[JSON]:
        if end is not None and end <= start:
            return []
        prefix = codec.message_prefix(runtime_id, handle_id)
        first = codec.message_key(runtime_id, handle_id, max(start, 0))
        stop = None if end is None else codec.message_key(runtime_id, handle_id, end)
        found = self._scan(Table.MESSAGES, prefix, first, stop=stop)
        return [codec.decode_value(Table.MESSAGES, k, v) for k, v in found]

    def get_checkpoint(self, runtime_id: str, handle_id: str) -> JSON | None:
        return self._get(Table.CHECKPOINTS, codec.pair_key(runtime_id, handle_id))

    def get_request(self, runtime_id: str, request_id: str) -> JSON | None:
        return self._get(Table.REQUESTS, codec.pair_key(runtime_id, request_id))

    def get_version(self, runtime_id: str, version_key: str) -> JSON | None:
        return self._get(Table.VERSIONS, codec.pair_key(runtime_id, version_key))

    def versions(self, runtime_id: str) -> list[JSON]:
        prefix = codec.runtime_prefix(runtime_id)
        found = self._scan(Table.VERSIONS, prefix, prefix)
        return [codec.decode_value(Table.VERSIONS, k, v) for k, v in found]

    def events(self, runtime_id: str, after_seq: int = 0, limit: int = 1000,
               max_bytes: int | None = None) -> list[Event]:
        if limit <= 0:
            return []
        prefix = codec.runtime_prefix(runtime_id)
        first = prefix + codec.u64("event seq", max(after_seq, 0) + 1)
        found = self._scan(Table.EVENTS, prefix, first, limit=limit, max_bytes=max_bytes)
        return [codec.decode_event(k, v) for k, v in found]

    def last_seq(self, runtime_id: str) -> int:
        prefix = codec.runtime_prefix(runtime_id)
        past = prefix[:-1] + b"\x01"  # the smallest key after every key of the prefix
        with self._reading() as env, env.begin(db=self._dbs[Table.EVENTS]) as txn:
            cursor = txn.cursor()
            found = cursor.prev() if cursor.set_range(past) else cursor.last()
            key = cursor.key()
            return codec.trailing_u64(key) if found and key.startswith(prefix) else 0

    def info(self) -> StoreInfo:
        with self._reading() as env:
            env_info, page_size = env.info(), env.stat()["psize"]
        return StoreInfo(path=str(self._path), size_bytes=(env_info["last_pgno"] + 1) * page_size,
                         map_size_bytes=env_info["map_size"], format_version=self._format)

    def close(self) -> None:
        """Finish queued commits, close the environment and release the directory lock."""
        if self._closed:
            return
        self._closed = True
        self._writer.close()
        self._env.close()
        self._lock.release()

    # ----------------------------------------------------------------- helpers

    @contextmanager
    def _reading(self) -> Iterator[lmdb.Environment]:
        if self._closed:
            raise StoreError(f"store {self._path} is closed")
        try:
            yield self._env
        except lmdb.Error as exc:
            raise StoreError(f"store read from {self._path} failed: {exc}") from exc

    def _get(self, table: Table, key: bytes) -> JSON | None:
        with self._reading() as env, env.begin(db=self._dbs[table]) as txn:
            raw = txn.get(key)
        return None if raw is None else codec.decode_value(table, key, raw)

    def _scan(self, table: Table, prefix: bytes, first: bytes, *, stop: bytes | None = None,
              limit: int | None = None, max_bytes: int | None = None) -> list[tuple[bytes, bytes]]:
        """Up to ``limit`` (key, value) pairs with ``first <= key < stop`` that start with ``prefix``,
        and none past the first that brings the values to ``max_bytes``."""
        out: list[tuple[bytes, bytes]] = []
        held = 0
        with self._reading() as env, env.begin(db=self._dbs[table]) as txn:
            cursor = txn.cursor()
            positioned = cursor.set_range(first) if first else cursor.first()
            if not positioned:
                return out
            for key, value in cursor.iternext():
                if not key.startswith(prefix) or (stop is not None and key >= stop):
                    break
                if limit is not None and len(out) >= limit:
                    break
                if max_bytes is not None and out and held >= max_bytes:
                    break
                out.append((key, value))
                held += len(value)
        return out


def _open_env(path: Path, map_size: int, sync: bool) -> lmdb.Environment:
    check_data_file(path)
    try:
        return lmdb.open(str(path), map_size=map_size, max_dbs=len(Table) + 1, sync=sync, subdir=True)
    except lmdb.Error as exc:
        raise StoreError(f"cannot open the store in {path}: {exc}") from exc


def _open_tables(env: lmdb.Environment, path: Path) -> tuple[dict[Table, lmdb._Database], int]:
    """Open (creating) every table, check the store-wide format version and migrate an older store."""
    try:
        # Reader slots left by a killed daemon would pin old pages; we hold the directory lock,
        # so any slot of another process is stale.
        env.reader_check()
        dbs = {table: env.open_db(table.value.encode()) for table in Table}
        meta = env.open_db(b"meta")
        with env.begin(write=True) as txn:
            raw = txn.get(META_FORMAT_KEY, db=meta)
            version = _format_version(path, raw)
            if version < FORMAT_VERSION:
                _migrate(txn, dbs, path, version)
            if version != FORMAT_VERSION or raw is None:
                txn.put(META_FORMAT_KEY, str(FORMAT_VERSION).encode(), db=meta)
            expiry_index.build(txn, dbs, meta)
    except lmdb.Error as exc:
        raise StoreError(f"cannot open the tables of the store in {path}: {exc}") from exc
    return dbs, FORMAT_VERSION


def _format_version(path: Path, raw: bytes | None) -> int:
    if raw is None:
        return FORMAT_VERSION
    if not raw.isdigit():
        raise StoreError(f"damaged record meta/format in {path}: {raw[:20]!r}")
    version = int(raw)
    if version > FORMAT_VERSION:
        raise FormatTooNew(f"the store in {path} has format version {version}, but this toolnexus-daemon "
                           f"reads up to {FORMAT_VERSION}; upgrade the daemon")
    return version


def _migrate(txn: lmdb.Transaction, dbs: dict[Table, lmdb._Database], path: Path, version: int) -> None:
    """Build what an older store lacks, in the opening transaction (so a kill during it leaves the
    store at its version, to be migrated again): version 1 the whole ``handle_index`` (pending
    rows included), version 2 only the pending rows."""
    if version >= 2:
        built = pending_index.build(txn, dbs, _contribution_of)
        log.warning("store migrated to the current format", extra={
            "path": str(path), "from_version": version, "to_version": FORMAT_VERSION,
            "pending_indexed": built})
        return
    indexed = damaged = 0
    cursor = txn.cursor(db=dbs[Table.HANDLES])
    for raw_key, raw_value in cursor.iternext():
        key = bytes(raw_key)
        try:
            record = codec.decode_value(Table.HANDLES, key, bytes(raw_value))
        except StoreError as exc:  # reported again, with its key, when the handle is read
            damaged += 1
            log.error("handle record skipped while building the handle indexes", extra={"error": str(exc)})
            continue
        rid, _, hid = key.decode("utf-8").partition("\x00")
        handle_index.add(txn, dbs, rid, hid, record)
        indexed += 1
    log.warning("store migrated to the current format", extra={
        "path": str(path), "from_version": version, "to_version": FORMAT_VERSION,
        "handles_indexed": indexed, "damaged_handles": damaged})


def _contribution_of(key: bytes, raw: bytes) -> Contribution | None:
    try:
        return contribution(summarize(codec.decode_value(Table.HANDLES, key, raw)))
    except StoreError:  # reported, with its key, when the handle is read
        return None

