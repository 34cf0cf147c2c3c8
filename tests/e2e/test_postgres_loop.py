"""On PostgreSQL a store read never holds the daemon's event loop: a read that waits on the database
leaves every other call answering.

The real daemon on a real PostgreSQL server. Another session locks the handles table, so the read of
a handle parked on disk waits on the database, as it would behind a slow link or a busy server; while
it waits, a health check and an unrelated call answer at once. A read made on the event loop would
freeze the whole daemon until the lock went.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import grpc
import psycopg
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.e2e.test_crash_reattach import connect
from tests.e2e.test_postgres import pg_daemon, suspend
from tests.support.daemon import DaemonProcess
from tests.support.grpc_client import openai_llm
from tests.support.pg_fixtures import pg_dsn, pg_server
from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_daemon.api._gen import runtime_pb2_grpc as pb_grpc
from toolnexus_devtools import ScriptedModelServer

__all__ = ["pg_daemon", "pg_dsn", "pg_server"]

# a call the locked read does not concern answers within this (it answers in milliseconds)
PROMPT_S = 1.5


def _waiting_on_lock(dsn: str, table: str) -> bool:
    """Whether some session waits for a lock on ``table`` (the daemon's read, here)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                           "AND query LIKE %s", (f"%{table}%",)).fetchone()
    return bool(row and row[0])


def _until(check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "the daemon never read the locked table"
        time.sleep(0.05)


def _timed(call: Callable[[], object]) -> float:
    started = time.monotonic()
    call()
    return time.monotonic() - started


def _call(stub: pb_grpc.AgentRuntimeStub, verb: str, rid: str, handle: str, request_id: str,
          model_url: str) -> grpc.Future:
    """``verb`` started on ``handle`` (parked on disk), or New of a runtime id never used."""
    if verb == "New":
        agent = pb.AgentDef(name="helper", does="helps", soul="You help.")
        return stub.New.future(pb.NewRequest(runtime_id=f"{rid}-fresh", agents=[agent],
                                             llm=openai_llm(model_url)), timeout=30)
    if verb == "Resume":
        return stub.Resume.future(pb.ResumeRequest(runtime_id=rid, handle=handle, no_wait=True,
                                                   answer=pb.Answer(id=request_id, ok=True)), timeout=30)
    if verb == "Post":
        return stub.Post.future(pb.PostRequest(runtime_id=rid, handle=handle,
                                               item=pb.InboxItem(text="hello")), timeout=30)
    if verb == "Spawn":
        return stub.Spawn.future(pb.SpawnRequest(runtime_id=rid, parent=handle, agent="operator"), timeout=30)
    if verb == "List":
        return stub.List.future(pb.ListRequest(runtime_id=rid), timeout=30)
    if verb == "Shutdown":
        return stub.Shutdown.future(pb.ShutdownRequest(runtime_id=rid), timeout=30)
    if verb == "ListPending":
        return stub.ListPending.future(pb.ListPendingRequest(runtime_id=rid), timeout=30)
    request = {"Snapshot": pb.SnapshotRequest, "Wait": pb.WaitRequest, "Close": pb.CloseRequest,
               "Interrupt": pb.InterruptRequest}[verb]
    return getattr(stub, verb).future(request(runtime_id=rid, handle=handle), timeout=30)


# the verb, and the table whose lock its reads wait on
CASES = [("Snapshot", "tn_handles"), ("Wait", "tn_handles"), ("Close", "tn_handles"), ("New", "tn_events"),
         ("Interrupt", "tn_handles"), ("Resume", "tn_handles"), ("Post", "tn_handles"),
         ("Spawn", "tn_handles"), ("List", "tn_handles"), ("ListPending", "tn_handles"),
         ("List", "tn_messages"), ("Shutdown", "tn_messages"), ("Interrupt", "tn_requests"),
         ("Close", "tn_requests"), ("Resume", "tn_requests")]


@pytest.mark.parametrize(("verb", "table"), CASES)
def test_a_read_waiting_on_the_database_does_not_stall_other_calls(
        pg_daemon: DaemonProcess, pg_dsn: str, tmp_path: Path, model_server: ScriptedModelServer,
        verb: str, table: str) -> None:
    rt = connect(pg_daemon.target, "openai", model_server.url)
    handle, request_id = suspend(rt)
    rid = rt.id
    rt.detach()
    pg_daemon.restart()  # the suspended handle is parked on disk now: the next call naming it reads it

    with psycopg.connect(pg_dsn) as locker, grpc.insecure_channel(pg_daemon.target) as channel:
        stub = pb_grpc.AgentRuntimeStub(channel)
        health = health_pb2_grpc.HealthStub(channel)
        locker.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")  # held until the rollback
        blocked = _call(stub, verb, rid, handle, request_id, model_server.url)
        try:
            _until(lambda: _waiting_on_lock(pg_dsn, table))
            assert not blocked.done()
            checked = _timed(lambda: health.Check(health_pb2.HealthCheckRequest(), timeout=5))
            informed = _timed(lambda: stub.Info(pb.InfoRequest(), timeout=5))  # reads the database too
        finally:
            locker.rollback()
        result = blocked.result()
    assert checked < PROMPT_S and informed < PROMPT_S, \
        f"a call waited {max(checked, informed):.2f} s behind another call's read (the event loop was held)"
    if verb == "Snapshot":
        assert result.state == "suspended"
    elif verb == "Wait":
        assert result.status == "pending"
    elif verb == "New":
        assert not result.reattached
