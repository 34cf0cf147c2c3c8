"""Hostile request ids and old records of suspended handles.

A webhook that suspends under an id the store cannot hold gets that call's error result before
anything is committed: the handle never wedges, Interrupt and Close answer, a restart does not call
the webhook again. A suspended handle whose stored pending request breaks today's bounds (written
before them) still reads, recovers across a restart, and can be interrupted and closed.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import lmdb
import pytest

from tests.api.test_hostile_peers import Peer, assert_readable, deep, echo_tool_result
from tests.support.daemon import DaemonProcess
from tests.support.grpc_client import open_stub
from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_daemon.store.codec import Table, decode_value, encode_value
from toolnexus_devtools import Reply, ScriptedModelServer, chat_response


@pytest.fixture
def model() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as server:
        yield server


@pytest.fixture
def peer(tmp_path: Path, model: ScriptedModelServer) -> Iterator[Peer]:
    p = Peer(tmp_path / "data", model)
    try:
        yield p
    finally:
        p.close()


def hook_calls(model: ScriptedModelServer) -> int:
    return len([r for r in model.received if r.path == "/hook"])


def suspending_hook(request_id: str) -> Reply:
    return Reply(body={"output": "", "pending": {"id": request_id, "kind": "approval", "prompt": "ok?"}})


def interrupt_and_close(peer: Peer) -> None:
    """Interrupt answers (a settled handle has nothing to interrupt: FAILED_PRECONDITION at most), and
    Close closes the handle."""
    try:
        peer.stub.Interrupt(pb.InterruptRequest(runtime_id=peer.rid, handle=peer.handle), timeout=10)
    except grpc.RpcError as err:
        assert err.code() is grpc.StatusCode.FAILED_PRECONDITION, err
    peer.stub.Close(pb.CloseRequest(runtime_id=peer.rid, handle=peer.handle), timeout=10)
    snap = peer.stub.Snapshot(pb.SnapshotRequest(runtime_id=peer.rid, handle=peer.handle), timeout=10)
    assert snap.state == "closed"


@pytest.mark.parametrize("request_id", ["i" * 300, "a\x00b", "é" * 126],
                         ids=["300-bytes", "nul-inside", "252-utf8-bytes"])
def test_a_request_id_the_store_cannot_hold_is_that_calls_error(
        peer: Peer, model: ScriptedModelServer, request_id: str) -> None:
    model.script = echo_tool_result
    model.route("/hook", lambda req: suspending_hook(request_id))
    result = peer.turn()
    assert result.status == "done" and "pending.id is over 250 bytes" in result.text, result
    snap = peer.stub.Snapshot(pb.SnapshotRequest(runtime_id=peer.rid, handle=peer.handle), timeout=10)
    assert snap.state == "idle" and not snap.HasField("pending")
    calls = hook_calls(model)
    peer.restart()
    assert_readable(peer)
    assert hook_calls(model) == calls  # nothing was left to recover
    interrupt_and_close(peer)


def _poison(value: Any) -> int:
    """Break every stored pending request inside ``value`` (a decoded record); how many were found."""
    found = 0
    if isinstance(value, dict):
        if "kind" in value and "prompt" in value and str(value.get("id", "")).startswith("q-"):
            value.update(url={"evil": True}, expires_at=12345, data=deep(150), prompt="p" * (9 << 20))
            found += 1
        found += sum(_poison(v) for v in value.values())
    elif isinstance(value, list):
        found += sum(_poison(v) for v in value)
    return found


def poison_pending(data_dir: Path, rid: str, handle: str) -> None:
    """Rewrite the suspended handle's pending request, wherever it is stored (handle, checkpoint,
    request index), the way a daemon without bounds stored it."""
    found = 0
    with lmdb.open(str(data_dir), max_dbs=16, map_size=1 << 30) as env:
        for table in (Table.HANDLES, Table.CHECKPOINTS, Table.REQUESTS):
            db = env.open_db(table.encode())
            with env.begin(write=True, db=db) as txn:
                for key, raw in list(txn.cursor()):
                    record: Any = decode_value(table, bytes(key), bytes(raw))
                    hits = _poison(record)
                    if hits:
                        found += hits
                        txn.put(bytes(key), encode_value(table, bytes(key), record))
    assert found >= 2, found


@pytest.mark.lmdb_only
def test_a_suspended_handle_with_an_old_hostile_pending_recovers_and_reads(
        peer: Peer, model: ScriptedModelServer) -> None:
    model.script = echo_tool_result
    model.route("/hook", lambda req: suspending_hook("q-1"))
    assert peer.turn().status == "pending"
    peer.channel.close()
    assert peer.proc.stop() == 0
    poison_pending(peer.data_dir, peer.rid, peer.handle)
    peer.proc = DaemonProcess(peer.data_dir).start()
    peer.channel, peer.stub = open_stub(peer.proc.target)
    assert_readable(peer)
    snap = peer.stub.Snapshot(pb.SnapshotRequest(runtime_id=peer.rid, handle=peer.handle), timeout=10)
    assert snap.state == "suspended" and snap.pending.id == "q-1"
    assert len(snap.pending.prompt.encode()) < 1 << 20 and "[output truncated" in snap.pending.prompt
    wait = peer.stub.Wait(pb.WaitRequest(runtime_id=peer.rid, handle=peer.handle, timeout_ms=1), timeout=10)
    assert wait.status == "pending" and wait.pending.id == "q-1"
    listed = peer.stub.List(pb.ListRequest(runtime_id=peer.rid), timeout=10)
    assert any(s.pending.id == "q-1" for s in listed.handles)
    out = peer.stub.Interrupt(pb.InterruptRequest(runtime_id=peer.rid, handle=peer.handle), timeout=10)
    assert out.from_state == "suspended"
    interrupt_and_close(peer)


@pytest.mark.lmdb_only
def test_an_answer_to_an_old_pending_whose_expiry_is_a_number_is_accepted(
        peer: Peer, model: ScriptedModelServer) -> None:
    model.script = echo_tool_result
    answered: list[bool] = []

    def hook(req: Any) -> Reply:
        if req.json().get("answer"):
            answered.append(True)
            return Reply(body={"output": "approved"})
        return suspending_hook("q-2")

    model.route("/hook", hook)
    assert peer.turn().status == "pending"
    peer.channel.close()
    assert peer.proc.stop() == 0
    poison_pending(peer.data_dir, peer.rid, peer.handle)
    peer.proc = DaemonProcess(peer.data_dir).start()
    peer.channel, peer.stub = open_stub(peer.proc.target)
    answer = pb.Answer(id="q-2", ok=True)
    out = peer.stub.Resume(pb.ResumeRequest(runtime_id=peer.rid, answer=answer), timeout=30)
    assert not out.duplicate and out.result.status == "done", out
    assert answered and "approved" in out.result.text
    assert_readable(peer)


def test_list_of_many_large_results_fits_in_one_message(tmp_path: Path, model: ScriptedModelServer) -> None:
    """Each reply is within --max-model-reply-bytes, but six of them together are over
    --max-message-bytes: List and Snapshot cut the texts (with a marker) instead of failing."""
    peer = Peer(tmp_path / "data", model, "--max-message-bytes", str(4 << 20))
    try:
        model.script = lambda body: chat_response(content="w" * 900_000, usage=(1, 1, 2))
        handles = [peer.handle] + [
            peer.stub.Spawn(pb.SpawnRequest(runtime_id=peer.rid, agent="worker"), timeout=10).handle
            for _ in range(5)]
        for handle in handles:
            peer.handle = handle
            result = peer.turn()
            assert result.status == "done" and len(result.text) == 900_000
        listed = peer.stub.List(pb.ListRequest(runtime_id=peer.rid), timeout=10)
        texts = [s.last_result.text for s in listed.handles if s.id in handles]
        assert len(texts) == 6 and all("[output truncated: 900000 bytes" in t for t in texts)
        assert all(t.startswith("w" * 1000) for t in texts)
        assert_readable(peer)
    finally:
        peer.close()
