"""What only the LMDB store promises: durability, a full map, the directory lock, damaged records."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import lmdb
import pytest

from toolnexus_daemon.errors import FormatTooNew, StoreError, StoreFull, StoreLocked
from toolnexus_daemon.store import Batch, LmdbStore
from toolnexus_daemon.store.codec import FORMAT_VERSION, META_FORMAT_KEY, Table, pair_key

from .samples import event, record, rich_event
from .writelock import write_lock_held

OPEN_IN_CHILD = """
import sys
from toolnexus_daemon.store import LmdbStore
try:
    store = LmdbStore(sys.argv[1])
except Exception as exc:
    print(type(exc).__name__, exc, flush=True)
    sys.exit(3)
print("ready", flush=True)
sys.stdin.read()
"""


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def opened(data_dir: Path) -> Iterator[LmdbStore]:
    store = LmdbStore(data_dir, map_size=1 << 24)
    yield store
    store.close()


def child(data_dir: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", OPEN_IN_CHILD, str(data_dir)], text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)


def write_raw(data_dir: Path, table: str, key: bytes, value: bytes) -> None:
    """Put bytes into a table behind the store's back (the store must be closed)."""
    with lmdb.open(str(data_dir), max_dbs=8) as env:
        with env.begin(write=True, db=env.open_db(table.encode())) as txn:
            txn.put(key, value)


async def test_data_survives_close_and_reopen(data_dir: Path) -> None:
    store = LmdbStore(data_dir)
    await store.commit(Batch(runtimes={"r1": record()}, handles={("r1", "root"): record(id="root")},
                             messages=[("r1", "root", 0, {"content": "hi"})],
                             checkpoints={("r1", "root"): {"step": 1}}, requests={("r1", "q"): {"h": "root"}},
                             events=[event("r1", 1), rich_event("r1", 2)]))
    store.close()

    store = LmdbStore(data_dir)
    try:
        assert store.get_runtime("r1") == record()
        assert store.handles("r1") == [record(id="root")]
        assert store.messages("r1", "root") == [{"content": "hi"}]
        assert store.get_checkpoint("r1", "root") == {"step": 1}
        assert store.get_request("r1", "q") == {"h": "root"}
        assert store.events("r1") == [event("r1", 1), rich_event("r1", 2)]
    finally:
        store.close()


async def test_full_map_raises_store_full_and_keeps_nothing(data_dir: Path) -> None:
    """A batch larger than the map fails whole; reads and smaller commits go on; a bigger map takes it."""
    store = LmdbStore(data_dir, map_size=64 * 1024)
    await store.commit(Batch(runtimes={"r1": {"v": 1}}))
    big = Batch(runtimes={"r1": {"v": 2}}, events=[event("r1", 1)],
                messages=[("r1", "root", i, {"content": "x" * 2000}) for i in range(64)])

    with pytest.raises(StoreFull, match="--map-size"):
        await store.commit(big)

    assert store.get_runtime("r1") == {"v": 1}
    assert store.messages("r1", "root") == [] and store.last_seq("r1") == 0
    await store.commit(Batch(handles={("r1", "root"): {}}))
    store.close()

    store = LmdbStore(data_dir, map_size=1 << 22)
    try:
        assert store.info().map_size_bytes == 1 << 22
        await store.commit(big)
        assert store.get_runtime("r1") == {"v": 2}
        assert len(store.messages("r1", "root")) == 64
        assert store.handles("r1") == [{}]
    finally:
        store.close()


def test_second_daemon_on_the_directory_is_refused(opened: LmdbStore, data_dir: Path) -> None:
    """Another process gets StoreLocked naming the directory and this process's pid."""
    proc = child(data_dir)
    out, _ = proc.communicate(timeout=30)

    assert proc.returncode == 3
    assert out.startswith("StoreLocked")
    assert f"data directory {data_dir} is in use by another toolnexus-daemon (pid {os.getpid()})" in out


def test_second_store_in_the_same_process_is_refused_until_close(opened: LmdbStore, data_dir: Path) -> None:
    """The refusal leaks no file descriptor, and close() releases the lock."""
    fds_before = len(os.listdir("/proc/self/fd"))
    for _ in range(3):
        with pytest.raises(StoreLocked, match=f"pid {os.getpid()}"):
            LmdbStore(data_dir)
    assert len(os.listdir("/proc/self/fd")) == fds_before
    opened.close()
    LmdbStore(data_dir).close()


def test_a_killed_holder_does_not_block_a_restart(data_dir: Path) -> None:
    proc = child(data_dir)
    assert proc.stdout is not None
    try:
        assert proc.stdout.readline().strip() == "ready"
        with pytest.raises(StoreLocked, match=f"pid {proc.pid}"):
            LmdbStore(data_dir)
    finally:
        proc.kill()
        proc.communicate(timeout=30)

    LmdbStore(data_dir).close()


async def test_cancelled_commit_waiting_for_the_writer_still_lands(opened: LmdbStore) -> None:
    """A commit queued behind a busy writer is not dropped when its caller is cancelled."""
    with write_lock_held(opened):
        queued = asyncio.create_task(opened.commit(Batch(runtimes={"r1": {"v": 1}})))
        await asyncio.sleep(0)  # let the task hand its batch to the writer queue
        queued.cancel()
        with pytest.raises(asyncio.CancelledError):
            await queued

    await opened.commit(Batch(runtimes={"r2": {}}))
    assert opened.get_runtime("r1") == {"v": 1}


@pytest.mark.parametrize("garbage", [b"\xff\xfe\x00garbage", b"TN\x01{not json", b"TN\x01[1, 2]", b""],
                         ids=["no-header", "bad-json", "not-an-object", "empty"])
async def test_damaged_record_names_its_key(data_dir: Path, garbage: bytes) -> None:
    """Reading a damaged record raises StoreError naming table and key; other records still read."""
    store = LmdbStore(data_dir)
    await store.commit(Batch(handles={("r1", "good"): {"ok": True}}))
    store.close()
    write_raw(data_dir, Table.HANDLES, pair_key("r1", "bad"), garbage)

    store = LmdbStore(data_dir)
    try:
        with pytest.raises(StoreError, match="damaged record handles/r1/bad"):
            store.get_handle("r1", "bad")
        with pytest.raises(StoreError, match="damaged record handles/r1/bad"):
            store.handles("r1")
        assert store.get_handle("r1", "good") == {"ok": True}
    finally:
        store.close()


async def test_damaged_event_names_its_key(data_dir: Path) -> None:
    """An event record that is valid JSON but not an event is damaged, not a crash."""
    store = LmdbStore(data_dir)
    await store.commit(Batch(events=[event("r1", 1)]))
    store.close()
    write_raw(data_dir, Table.EVENTS, b"r1\x00" + (2).to_bytes(8, "big"), b'TN\x01{"seq": 2}')

    store = LmdbStore(data_dir)
    try:
        with pytest.raises(StoreError, match="damaged record events/r1/2"):
            store.events("r1")
        assert store.events("r1", limit=1) == [event("r1", 1)]
        assert store.last_seq("r1") == 2
    finally:
        store.close()


async def test_record_from_a_newer_format_raises_format_too_new(data_dir: Path) -> None:
    LmdbStore(data_dir).close()
    newer = FORMAT_VERSION + 1
    write_raw(data_dir, Table.CHECKPOINTS, pair_key("r1", "root"), b"TN" + bytes([newer]) + b'{"step": 1}')

    store = LmdbStore(data_dir)
    try:
        with pytest.raises(FormatTooNew, match=f"checkpoints/r1/root has format version {newer}"):
            store.get_checkpoint("r1", "root")
    finally:
        store.close()


def test_store_from_a_newer_format_is_refused_at_open(data_dir: Path) -> None:
    """A newer store-wide format refuses to open, and the refusal leaves the directory unlocked."""
    LmdbStore(data_dir).close()
    newer = FORMAT_VERSION + 1
    write_raw(data_dir, "meta", META_FORMAT_KEY, str(newer).encode())

    for _ in range(2):
        with pytest.raises(FormatTooNew, match=f"format version {newer}"):
            LmdbStore(data_dir)


def test_info_reports_path_and_map_size(opened: LmdbStore, data_dir: Path) -> None:
    info = opened.info()
    assert (info.path, info.map_size_bytes, info.format_version) == (str(data_dir), 1 << 24, FORMAT_VERSION)
    assert 0 < info.size_bytes < info.map_size_bytes


async def test_unsynced_store_round_trips(data_dir: Path) -> None:
    """--no-sync changes durability on power loss, not what reads see."""
    store = LmdbStore(data_dir, sync=False)
    await store.commit(Batch(runtimes={"r1": {"v": 1}}))
    store.close()
    store = LmdbStore(data_dir, sync=False)
    try:
        assert store.get_runtime("r1") == {"v": 1}
    finally:
        store.close()


async def test_a_store_of_format_1_gets_its_handle_state_index_built(data_dir: Path) -> None:
    """A data dir written before ``handle_index`` existed is migrated when first opened;
    a damaged handle record is skipped by the migration (and reported when read)."""
    store = LmdbStore(data_dir)
    try:
        await store.commit(Batch(handles={("r1", "root"): record(id="root", state="idle"),
                                          ("r1", "root/a"): record(id="root/a", state="running"),
                                          ("r1", "root/bad"): record(id="root/bad", state="idle")}))
    finally:
        store.close()
    with lmdb.open(str(data_dir), max_dbs=16) as env:  # what a version-1 daemon left behind
        with env.begin(write=True) as txn:
            txn.drop(env.open_db(Table.HANDLE_INDEX.encode(), txn=txn), delete=True)
            txn.put(pair_key("r1", "root/bad"), b"\xff not a record", db=env.open_db(b"handles", txn=txn))
            txn.put(META_FORMAT_KEY, b"1", db=env.open_db(b"meta", txn=txn))

    store = LmdbStore(data_dir)
    try:
        assert store.handles_to_recover("r1") == ["root/a"]
        assert store.census("r1").states == {"running": 1}
        assert store.info().format_version == FORMAT_VERSION
        with pytest.raises(StoreError, match="handles/r1/root/bad"):
            store.get_handle("r1", "root/bad")
    finally:
        store.close()
    with lmdb.open(str(data_dir), max_dbs=16, readonly=True) as env, env.begin() as txn:
        assert txn.get(META_FORMAT_KEY, db=env.open_db(b"meta", txn=txn)) == str(FORMAT_VERSION).encode()
