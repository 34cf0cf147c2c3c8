"""Graceful stop by SIGTERM or a daemon-wide Shutdown: clear stream statuses, exit 0, every handle goes on."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import grpc

from tests.support.daemon import DaemonProcess
from tests.support.grpc_client import approval_agent, code_of, native_agent, open_stub, openai_llm, wait_until
from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_devtools import Reply, ScriptedModelServer, chat_response


def _final_status(stream: Iterator[object]) -> grpc.RpcError:
    """Read a stream to its end, which must be an error status."""
    try:
        for _ in stream:
            pass
    except grpc.RpcError as err:
        return err
    raise AssertionError("the stream ended OK; a shutdown must say UNAVAILABLE")


def _probe(target: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "toolnexus_daemon", "health", "--target", target, "--timeout", "2"]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=30)


def test_sigterm_ends_streams_unavailable_and_a_restart_continues_every_handle(
        tmp_path: Path, model: ScriptedModelServer) -> None:
    """A running turn, a suspended handle and an idle one; Watch and Connect open; then SIGTERM."""
    proc = DaemonProcess(tmp_path / "data")
    channel, stub = open_stub(proc.start().target)
    with channel:
        agents = [approval_agent("approver", model.approval_url), native_agent("slow", "unused")]
        new = pb.NewRequest(agents=agents, llm=openai_llm(model.url, timeout_ms=10_000))
        rid = stub.New(new, timeout=5).runtime_id
        parked = stub.Spawn(pb.SpawnRequest(runtime_id=rid, agent="approver"), timeout=5).handle
        stub.Wake(pb.WakeRequest(runtime_id=rid, handle=parked, prompt="ask"), timeout=5)
        pending = stub.Wait(pb.WaitRequest(runtime_id=rid, handle=parked, timeout_ms=10_000), timeout=15)
        idle = stub.Spawn(pb.SpawnRequest(runtime_id=rid, agent="slow"), timeout=5).handle
        running = stub.Spawn(pb.SpawnRequest(runtime_id=rid, agent="slow"), timeout=5).handle
        model.push(Reply(200, chat_response("too late"), delay=3.0), chat_response("after restart"))
        calls = model.calls
        stub.Wake(pb.WakeRequest(runtime_id=rid, handle=running, prompt="go"), timeout=5)
        watch = stub.Watch(pb.WatchRequest(runtime_id=rid), timeout=30)
        outgoing: queue.Queue[pb.WorkerMessage | None] = queue.Queue()
        outgoing.put(pb.WorkerMessage(hello=pb.WorkerHello(runtime_id=rid, worker_id="w")))
        connect = stub.Connect(iter(outgoing.get, None), timeout=30)
        assert next(connect).HasField("welcome")
        wait_until(lambda: model.calls == calls + 1)
        assert _probe(proc.target).returncode == 0

        assert proc.stop() == 0
        watch_end, connect_end = _final_status(watch), _final_status(connect)
        outgoing.put(None)
    assert watch_end.code() is grpc.StatusCode.UNAVAILABLE
    assert "shutting down" in watch_end.details() and "after_seq=" in watch_end.details()
    assert connect_end.code() is grpc.StatusCode.UNAVAILABLE and "shutting down" in connect_end.details()
    assert json.loads(proc.log_lines[-1])["msg"] == "stopped"  # after the store was closed
    assert _probe(proc.target).returncode == 1

    channel, stub = open_stub(proc.start().target)
    try:
        with channel:
            done = stub.Wait(pb.WaitRequest(runtime_id=rid, handle=running, timeout_ms=10_000), timeout=15)
            assert (done.status, done.text) == ("done", "after restart")
            snap = stub.Snapshot(pb.SnapshotRequest(runtime_id=rid, handle=idle), timeout=5)
            assert snap.state == "idle"
            answer = pb.Answer(id=pending.pending.id, ok=True)
            resumed = stub.Resume(pb.ResumeRequest(runtime_id=rid, answer=answer), timeout=15)
            assert (resumed.handle, resumed.result.status) == (parked, "done")
    finally:
        proc.stop()


def test_a_daemon_wide_shutdown_needs_the_operators_flag(tmp_path: Path) -> None:
    """Without --allow-remote-shutdown the shared token does not stop the daemon for every tenant."""
    with DaemonProcess(tmp_path / "data") as proc:
        channel, stub = open_stub(proc.target)
        with channel:
            code, details = code_of(lambda: stub.Shutdown(pb.ShutdownRequest(daemon=True), timeout=5))
            assert code is grpc.StatusCode.PERMISSION_DENIED and "--allow-remote-shutdown" in details
            assert stub.Info(pb.InfoRequest(), timeout=5).version  # still serving
        assert proc.proc is not None and proc.proc.poll() is None


def test_a_daemon_wide_shutdown_stops_it_gracefully(tmp_path: Path) -> None:
    """Shutdown{daemon: true} is SIGTERM by RPC: OK to the caller, then exit 0."""
    proc = DaemonProcess(tmp_path / "data", "--allow-remote-shutdown")
    channel, stub = open_stub(proc.start().target)
    with channel:
        mixed = pb.ShutdownRequest(daemon=True, runtime_id="rt-x")
        code, details = code_of(lambda: stub.Shutdown(mixed, timeout=5))
        assert code is grpc.StatusCode.INVALID_ARGUMENT and "runtime_id" in details
        stub.Shutdown(pb.ShutdownRequest(daemon=True), timeout=5)
    assert proc.proc is not None
    assert proc.proc.wait(15) == 0
    assert '"msg": "stopped"' in proc.logs()


def test_health_probe_fails_when_nothing_listens(tmp_path: Path) -> None:
    done = _probe(f"unix:{tmp_path}/nobody.sock")
    assert done.returncode == 1 and "UNAVAILABLE" in done.stderr


