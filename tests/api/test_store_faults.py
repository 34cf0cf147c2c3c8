"""Store faults with clear outcomes (docs/protocol.md §5), against the real daemon and a real LMDB directory.

A full map is RESOURCE_EXHAUSTED for that one write, keeps nothing of it,
leaves reads working, and a restart with a larger ``--map-size`` goes on. A
second daemon on a held directory exits naming the holder. Records the
daemon cannot trust — damaged bytes, or a format version newer than it
reads — are refused with a message naming their key, never misread, and one
bad record does not take the whole daemon down (no crash loop on restart).
Records are tampered with through the ``lmdb`` module while the daemon is
stopped, exactly as a disk fault or a downgrade would leave them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import grpc
import lmdb
import pytest

from tests.support.daemon import DaemonProcess
from tests.support.grpc_client import code_of, open_stub, openai_llm
from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_daemon.api._gen import runtime_pb2_grpc as pb_grpc
from toolnexus_daemon.store.codec import FORMAT_VERSION, META_FORMAT_KEY, Table, pair_key
from toolnexus_devtools import ScriptedModelServer

pytestmark = pytest.mark.lmdb_only  # damages, fills or locks LMDB files on purpose

TALKER = pb.AgentDef(name="talker", does="answers", soul="You answer briefly.")


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def model() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as server:
        yield server


class Session:
    """A running daemon and a stub to it; ``close`` stops the daemon with SIGTERM."""

    def __init__(self, data_dir: Path, *args: str) -> None:
        self.proc = DaemonProcess(data_dir, *args).start()
        self.channel, self.stub = open_stub(self.proc.target)

    def close(self) -> int:
        self.channel.close()
        return self.proc.stop()


def new_runtime(stub: pb_grpc.AgentRuntimeStub, model: ScriptedModelServer) -> tuple[str, str]:
    """A runtime with one idle ``talker`` handle; returns (runtime id, handle)."""
    rid = stub.New(pb.NewRequest(agents=[TALKER], llm=openai_llm(model.url)), timeout=10).runtime_id
    handle = stub.Spawn(pb.SpawnRequest(runtime_id=rid, agent="talker"), timeout=10).handle
    return rid, handle


def run_turn(stub: pb_grpc.AgentRuntimeStub, rid: str, handle: str, prompt: str) -> pb.TaskResult:
    stub.Wake(pb.WakeRequest(runtime_id=rid, handle=handle, prompt=prompt), timeout=10)
    return stub.Wait(pb.WaitRequest(runtime_id=rid, handle=handle, timeout_ms=10_000), timeout=20)


def stored_events(stub: pb_grpc.AgentRuntimeStub, rid: str) -> list[pb.Event]:
    """Every event Watch replays from seq 0 (the stream is cut once it goes quiet)."""
    events: list[pb.Event] = []
    try:
        for event in stub.Watch(pb.WatchRequest(runtime_id=rid, after_seq=0), timeout=1.5):
            events.append(event)
    except grpc.RpcError as err:
        if err.code() is not grpc.StatusCode.DEADLINE_EXCEEDED:
            raise
    return events


def rewrite_record(data_dir: Path, table: str, key: bytes, value: bytes | None = None,
                   version: int | None = None) -> None:
    """Overwrite one record behind the daemon's back (it must be stopped): with ``value`` as raw
    bytes, or with the stored record re-wrapped in an envelope of format ``version``."""
    with lmdb.open(str(data_dir), max_dbs=16) as env:
        with env.begin(write=True, db=env.open_db(table.encode())) as txn:
            if value is None:
                stored = txn.get(key)
                assert stored is not None, f"no record {key!r} in {table}"
                value = b"TN" + bytes([version or 1]) + bytes(stored[3:])
            txn.put(key, value)


# ----------------------------------------------------------------- a full map


def test_a_full_map_refuses_that_write_keeps_reads_and_a_bigger_map_continues(
        data_dir: Path, model: ScriptedModelServer) -> None:
    session = Session(data_dir, "--map-size", "256KiB")
    try:
        stub = session.stub
        rid, handle = new_runtime(stub, model)
        assert run_turn(stub, rid, handle, "hello").status == "done"
        events_before = stored_events(stub, rid)
        huge = "x" * 400_000  # the user message alone is larger than the map

        code, details = code_of(lambda: stub.Wake(
            pb.WakeRequest(runtime_id=rid, handle=handle, prompt=huge), timeout=10))

        assert code is grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "full" in details and "--map-size" in details, details
        # nothing of the refused wake was kept, and reads go on
        snap = stub.Snapshot(pb.SnapshotRequest(runtime_id=rid, handle=handle), timeout=10)
        assert (snap.state, snap.last_result.text, snap.turns_total) == ("idle", "ok", 1)
        assert [e.seq for e in stored_events(stub, rid)] == [e.seq for e in events_before]
        assert [h.id for h in stub.List(pb.ListRequest(runtime_id=rid), timeout=10).handles] == [handle]
        # a write that fits still lands
        assert run_turn(stub, rid, handle, "again").status == "done"
    finally:
        assert session.close() == 0

    session = Session(data_dir, "--map-size", "64MiB")
    try:
        result = run_turn(session.stub, rid, handle, huge)
        assert (result.status, result.turns) == ("done", 3)
        seqs = [e.seq for e in stored_events(session.stub, rid)]
        assert seqs == list(range(1, len(seqs) + 1))
    finally:
        session.close()


def test_a_full_map_during_a_turn_ends_it_error_and_the_handle_takes_the_next_wake(
        data_dir: Path, model: ScriptedModelServer) -> None:
    """A model reply too large to commit is not lost silently: the turn ends ``error`` naming the
    fix (in memory and on disk), Wait does not hang, and the handle takes the next wake."""
    huge_reply = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "y" * 400_000},
                               "finish_reason": "stop"}],
                  "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
    session = Session(data_dir, "--map-size", "256KiB")
    try:
        rid, handle = new_runtime(session.stub, model)
        model.push(huge_reply)
        result = run_turn(session.stub, rid, handle, "say a lot")
        assert result.status == "error" and "--map-size" in result.text, result
        snap = session.stub.Snapshot(pb.SnapshotRequest(runtime_id=rid, handle=handle), timeout=10)
        assert snap.state == "idle"
        again = run_turn(session.stub, rid, handle, "say a little")
        assert (again.status, again.text) == ("done", "ok"), again
    finally:
        session.close()

    session = Session(data_dir, "--map-size", "64MiB")
    try:
        snap = session.stub.Snapshot(pb.SnapshotRequest(runtime_id=rid, handle=handle), timeout=10)
        assert (snap.state, snap.last_result.text) == ("idle", "ok")
    finally:
        session.close()


# ----------------------------------------------------------------- the directory lock


def test_a_second_daemon_on_the_data_dir_exits_naming_the_holder(data_dir: Path) -> None:
    first = Session(data_dir)
    try:
        second = DaemonProcess(data_dir)
        with pytest.raises(RuntimeError, match="daemon exited"):
            second.start()
        assert second.proc is not None and second.proc.returncode not in (0, None)
        assert first.proc.proc is not None
        assert second.has_logged(f"pid {first.proc.proc.pid}") and str(data_dir) in second.logs()
        assert first.stub.Info(pb.InfoRequest(), timeout=10).version  # the holder is untouched
    finally:
        first.close()


# ----------------------------------------------------------------- records it cannot trust


def two_runtimes(data_dir: Path, model: ScriptedModelServer) -> tuple[tuple[str, str], tuple[str, str]]:
    """Two runtimes that each finished a turn, the daemon then stopped; returns (rid, handle) pairs."""
    session = Session(data_dir)
    try:
        pairs = new_runtime(session.stub, model), new_runtime(session.stub, model)
        for rid, handle in pairs:
            assert run_turn(session.stub, rid, handle, "hello").status == "done"
    finally:
        assert session.close() == 0
    return pairs


def assert_serves_the_rest(session: Session, good: tuple[str, str], bad: tuple[str, str], key: str) -> None:
    """The daemon runs and serves the good runtime; the bad handle is refused with DATA_LOSS naming
    the record (and so is the log), while the rest of the bad handle's runtime still serves."""
    assert session.proc.proc is not None and session.proc.proc.poll() is None
    assert run_turn(session.stub, *good, "still there?").status == "done"
    code, details = code_of(lambda: session.stub.Snapshot(
        pb.SnapshotRequest(runtime_id=bad[0], handle=bad[1]), timeout=10))
    assert code is grpc.StatusCode.DATA_LOSS and key in details, (code, details)
    assert session.proc.has_logged(key), session.proc.logs()
    root = session.stub.Snapshot(pb.SnapshotRequest(runtime_id=bad[0], handle="root"), timeout=10)
    assert root.id == "root"
    spawned = session.stub.Spawn(pb.SpawnRequest(runtime_id=bad[0], agent="talker"), timeout=10).handle
    assert run_turn(session.stub, bad[0], spawned, "and you?").status == "done"


def test_a_damaged_record_is_reported_with_its_key_and_the_rest_is_served(
        data_dir: Path, model: ScriptedModelServer) -> None:
    good, bad = two_runtimes(data_dir, model)
    rewrite_record(data_dir, Table.HANDLES, pair_key(*bad), value=b"\xff\xfe not a record")

    session = Session(data_dir)
    try:
        assert_serves_the_rest(session, good, bad, f"damaged record handles/{bad[0]}/{bad[1]}")
    finally:
        session.close()


def test_a_damaged_root_record_quarantines_its_runtime_only(
        data_dir: Path, model: ScriptedModelServer) -> None:
    """A start reads each runtime's root (and the handles to recover): one it cannot trust makes that
    runtime DATA_LOSS, naming the key, instead of running on a guess, and every other runtime serves."""
    good, bad = two_runtimes(data_dir, model)
    rewrite_record(data_dir, Table.HANDLES, pair_key(bad[0], "root"), value=b"TN\x01{not json")
    key = f"damaged record handles/{bad[0]}/root"

    session = Session(data_dir)
    try:
        assert session.proc.proc is not None and session.proc.proc.poll() is None
        assert session.proc.has_logged(key), session.proc.logs()
        assert run_turn(session.stub, *good, "still there?").status == "done"
        for handle in ("root", bad[1]):
            code, details = code_of(lambda h=handle: session.stub.Snapshot(
                pb.SnapshotRequest(runtime_id=bad[0], handle=h), timeout=10))
            assert code is grpc.StatusCode.DATA_LOSS and key in details, (code, details)
    finally:
        session.close()


def test_a_record_of_a_newer_format_is_refused_not_misread(
        data_dir: Path, model: ScriptedModelServer) -> None:
    """The record is valid JSON in a newer envelope: a daemon that ignored the version would misread it."""
    good, bad = two_runtimes(data_dir, model)
    newer = FORMAT_VERSION + 1
    rewrite_record(data_dir, Table.HANDLES, pair_key(*bad), version=newer)

    session = Session(data_dir)
    try:
        assert_serves_the_rest(session, good, bad, f"handles/{bad[0]}/{bad[1]} has format version {newer}")
    finally:
        session.close()


def test_a_store_of_a_newer_format_is_refused_at_start(data_dir: Path) -> None:
    Session(data_dir).close()
    newer = FORMAT_VERSION + 1
    rewrite_record(data_dir, "meta", META_FORMAT_KEY, value=str(newer).encode())

    proc = DaemonProcess(data_dir)
    with pytest.raises(RuntimeError, match="daemon exited"):
        proc.start()
    assert proc.proc is not None and proc.proc.returncode not in (0, None)
    assert proc.has_logged(f"format version {newer}") and "upgrade" in proc.logs()
    assert json.dumps(str(data_dir))[1:-1] in proc.logs()
