"""The real daemon on a real PostgreSQL server (``--store postgresql://…``, a database per test).

Restart recovery after kill -9, a suspension answered across the restart, Watch
replaying the stored events, and a database outage under a running daemon: the
server is stopped, RPCs answer UNAVAILABLE naming the database and health goes
NOT_SERVING; it is started again and the daemon serves by itself, nothing lost.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.e2e.test_crash_reattach import AGENT, connect
from tests.support.daemon import DaemonProcess
from tests.support.pg import PgServer
from tests.support.pg_fixtures import pg_dsn, pg_server
from toolnexus_client import Runtime
from toolnexus_client.errors import ToolnexusError
from toolnexus_devtools import ScriptedModelServer

__all__ = ["pg_dsn", "pg_server"]


@pytest.fixture
def pg_daemon(tmp_path: Path, pg_dsn: str) -> DaemonProcess:
    proc = DaemonProcess(tmp_path / "unused-lmdb", "--store", pg_dsn).start()
    yield proc  # type: ignore[misc]
    proc.stop()


def suspend(rt: Runtime) -> tuple[str, str]:
    handle = rt.spawn(rt.root, AGENT)
    rt.wake(handle, "please perform the secret action")
    result = rt.wait(handle, timeout=30)
    assert result.status == "pending" and result.pending is not None
    return handle, result.pending.id


def health(target: str) -> int:
    with grpc.insecure_channel(target) as channel:
        reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
        return int(reply.status)


def test_suspension_survives_kill9_and_watch_replays(pg_daemon: DaemonProcess, tmp_path: Path,
                                                     model_server: ScriptedModelServer) -> None:
    """Parked in PostgreSQL, answered after kill -9 and a restart; Watch replays every event gaplessly."""
    rt = connect(pg_daemon.target, "openai", model_server.url)
    handle, request_id = suspend(rt)
    before = rt.snapshot(handle)
    info = rt.info()
    assert info.store_path.startswith("postgresql://") and info.store_size_bytes > 0
    assert not (tmp_path / "unused-lmdb").exists()  # --store means no LMDB at all

    pg_daemon.kill9()
    rt.detach()
    pg_daemon.start()

    rt = connect(pg_daemon.target, "openai", model_server.url, runtime_id=rt.id)
    try:
        resumed = rt.resume({"id": request_id, "ok": True})
        assert resumed.result is not None and resumed.result.text == "action performed"
        snap = rt.snapshot(handle)
        assert (snap.state, snap.turns_total) == ("idle", before.turns_total + 1)
        stream = rt.watch(after_seq=0)
        seqs = []
        for event in stream:
            seqs.append(event.seq)
            if event.type == "transition" and event.handle == handle and event.to_state == "idle":
                break
        stream.cancel()
        assert seqs == list(range(1, len(seqs) + 1)) and len(seqs) > 3
    finally:
        rt.detach()


def test_database_outage_is_unavailable_then_heals(pg_daemon: DaemonProcess, pg_server: PgServer,
                                                   model_server: ScriptedModelServer) -> None:
    """Server stopped: health NOT_SERVING, RPCs UNAVAILABLE naming the database; started: serves again."""
    rt = connect(pg_daemon.target, "openai", model_server.url)
    seen: list[int] = []
    try:
        handle, request_id = suspend(rt)
        watcher = threading.Thread(target=_follow, args=(rt, seen), daemon=True)
        watcher.start()
        deadline = time.monotonic() + 10
        while not seen:  # the watcher has replayed what is stored before the server goes away
            assert time.monotonic() < deadline
            time.sleep(0.02)
        pg_server.stop()
        try:
            with pytest.raises(ToolnexusError) as refused:
                rt.spawn(rt.root, AGENT)  # a commit: the link notices the database is gone
            assert refused.value.code == "UNAVAILABLE" and "PostgreSQL database" in str(refused.value)
            assert "password" not in str(refused.value).lower()
            assert health(pg_daemon.target) == health_pb2.HealthCheckResponse.NOT_SERVING
            with pytest.raises(ToolnexusError) as gated:
                rt.snapshot(handle)
            assert gated.value.code == "UNAVAILABLE"
        finally:
            pg_server.start()
        deadline = time.monotonic() + 20
        while health(pg_daemon.target) != health_pb2.HealthCheckResponse.SERVING:
            assert time.monotonic() < deadline, "daemon did not serve again:\n" + pg_daemon.logs()
            time.sleep(0.1)
        resumed = rt.resume({"id": request_id, "ok": True})
        assert resumed.result is not None and resumed.result.text == "action performed"
        assert [h.id for h in rt.list()] == [handle]  # the refused spawn left nothing behind
        # the watcher lived through the outage (re-opening from its last seq when its stream ended):
        # every event once, in order, up to the end of the resumed turn
        watcher.join(20)
        assert not watcher.is_alive(), seen
        assert seen == list(range(1, len(seen) + 1)) and len(seen) > 3
    finally:
        rt.detach()


def _follow(rt: Runtime, seen: list[int]) -> None:
    """Watch from the start until the handle goes idle; a stream the outage ends is re-opened after
    the last seq received, as a client that resumes a Watch does."""
    for _ in range(200):  # bounded: each round is one stream, ended by the outage or by the idle
        stream = rt.watch(after_seq=seen[-1] if seen else 0)
        try:
            for event in stream:
                seen.append(event.seq)
                if event.type == "transition" and event.to_state == "idle":
                    return
        except ToolnexusError:
            time.sleep(0.2)
        finally:
            stream.cancel()


def test_a_second_daemon_on_the_same_database_joins_it_one_owner_per_runtime(
        pg_daemon: DaemonProcess, tmp_path: Path, model_server: ScriptedModelServer) -> None:
    """Every daemon on PostgreSQL holds runtime leases: a second one on the database serves the same
    runtimes through their one owner (forwarded), and takes them over at once when that owner is
    killed on the same machine (its process is provably gone: no waiting for the lease)."""
    assert pg_daemon.store_dsn
    rt = connect(pg_daemon.target, "openai", model_server.url)
    handle, request_id = suspend(rt)
    second = DaemonProcess(tmp_path / "other", "--store", pg_daemon.store_dsn).start()
    try:
        assert health(second.target) == health_pb2.HealthCheckResponse.SERVING
        through = connect(second.target, "openai", model_server.url, runtime_id=rt.id)
        assert through.snapshot(handle).state == "suspended"
        pg_daemon.kill9()
        killed = time.monotonic()
        resumed = through.resume({"id": request_id, "ok": True})
        assert resumed.result is not None and resumed.result.text == "action performed"
        assert time.monotonic() - killed < 5  # the lease is 10 s: it was not waited out
        assert second.has_logged("taken over at once from a daemon process of this host that is gone") \
            or second.has_logged("runtime taken over")
        through.detach()
    finally:
        rt.detach()
        second.stop()
