"""The daemon as a server: health, reflection, Info, unix sockets, one daemon per data directory."""

from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import grpc
import pytest
from google.protobuf import descriptor_pool
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase

from tests.support.daemon import DaemonProcess
from tests.support.grpc_client import code_of, open_stub
from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_daemon.api._gen import runtime_pb2_grpc as pb_grpc

SERVICE = "toolnexus.agents.v1.AgentRuntime"


def test_health_reports_serving_for_the_daemon_and_the_service(channel: grpc.Channel) -> None:
    """Once the serving line is logged, health says SERVING for "" and for AgentRuntime."""
    health = health_pb2_grpc.HealthStub(channel)
    for name in ("", SERVICE):
        reply = health.Check(health_pb2.HealthCheckRequest(service=name), timeout=5)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING


def test_reflection_lists_and_describes_the_service(channel: grpc.Channel) -> None:
    """Server reflection lists AgentRuntime and resolves its messages."""
    db = ProtoReflectionDescriptorDatabase(channel)
    assert SERVICE in db.get_services()
    answer = descriptor_pool.DescriptorPool(db).FindMessageTypeByName("toolnexus.agents.v1.Answer")
    assert [f.name for f in answer.fields] == ["id", "ok", "data", "reason"]


def test_info_reports_version_store_and_limits(stub: pb_grpc.AgentRuntimeStub, daemon: DaemonProcess) -> None:
    """Info names the store path and the limits in force."""
    info = stub.Info(pb.InfoRequest(), timeout=5)
    assert info.version
    if daemon.store_dsn:  # PostgreSQL: the DSN (no password in tests' DSNs, so nothing to redact)
        assert info.store_path == daemon.store_dsn
    else:
        assert Path(info.store_path).resolve() == daemon.data_dir.resolve()
    assert info.store_size_bytes > 0
    assert info.format_version
    assert info.limits["max_turns"] == 6
    assert info.limits["inbox_cap"] == 8
    assert info.limits["max_message_bytes"] > 0


def test_info_for_an_unknown_runtime_is_not_found(stub: pb_grpc.AgentRuntimeStub) -> None:
    code, details = code_of(lambda: stub.Info(pb.InfoRequest(runtime_id="nope"), timeout=5))
    assert code is grpc.StatusCode.NOT_FOUND
    assert '"nope"' in details


def test_unix_socket_is_owner_only_and_a_stale_file_is_replaced(tmp_path: Path) -> None:
    """A leftover socket file does not block the start; the new socket is mode 0600."""
    sock_dir = Path(tempfile.mkdtemp(prefix="tnd-", dir="/tmp"))  # short path: sun_path is ~108 bytes
    sock = sock_dir / "d.sock"
    _leave_stale_socket(sock)
    proc = DaemonProcess(tmp_path / "data", listen=("127.0.0.1:0", f"unix:{sock}"))
    try:
        proc.start()
        assert f"unix:{sock}" in proc.addresses
        assert stat.S_IMODE(os.stat(sock).st_mode) == 0o600
        channel, stub = open_stub(f"unix:{sock}")
        with channel:
            assert stub.Info(pb.InfoRequest(), timeout=5).version
    finally:
        proc.stop()
        shutil.rmtree(sock_dir, ignore_errors=True)


def test_unix_socket_in_a_missing_directory_fails_clearly(tmp_path: Path) -> None:
    proc = _run_serve(tmp_path / "data", "--listen", "unix:/nonexistent-dir-xyz/d.sock")
    assert proc.returncode == 2
    assert "/nonexistent-dir-xyz does not exist" in proc.stderr


@pytest.mark.lmdb_only
def test_a_second_daemon_on_the_same_data_dir_exits_naming_the_holder(daemon: DaemonProcess) -> None:
    """The data directory is locked: the second daemon says who holds it and exits non-zero."""
    proc = _run_serve(daemon.data_dir)
    assert proc.returncode != 0
    assert daemon.proc is not None
    assert f"pid {daemon.proc.pid}" in proc.stderr
    assert "in use" in proc.stderr


def _run_serve(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "toolnexus_daemon", "serve", "--data-dir", str(data_dir), *args]
    if "--listen" not in args:
        cmd += ["--listen", "127.0.0.1:0"]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=30)


def _leave_stale_socket(path: Path) -> None:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(path))
    s.close()  # the file stays behind, with nobody listening: what a crashed daemon leaves
    assert path.exists()
