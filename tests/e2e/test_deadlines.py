"""Deadlines that fire, end to end (docs/protocol.md §10): a real daemon, the scripted model server
and a webhook tool that suspends; nobody answers, and the daemon declines the suspension itself
within about a second of its ``expires_at`` — also when it was down at that moment."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import grpc
import pytest

from tests.e2e.test_cluster import Node, _owner
from tests.support.daemon import DaemonProcess
from tests.support.grpc_client import approval_agent, code_of, open_stub, openai_llm, struct
from tests.support.pg_fixtures import pg_dsn, pg_server
from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_daemon.api._gen import runtime_pb2_grpc as pb_grpc
from toolnexus_daemon.clock import parse_rfc3339, rfc3339
from toolnexus_daemon.model import JSON
from toolnexus_devtools import ScriptedModelServer
from toolnexus_devtools.model_server import Received

__all__ = ["pg_dsn", "pg_server"]

DECLINED = "declined/expired: approve?"
# generous bounds for a loaded machine: the decline lands within this long after the deadline
LATE_S = 3.0


def expiring_webhook(expires_at: str) -> Callable[[Received], JSON]:
    """A webhook tool that suspends on one request with ``expires_at`` until approved."""

    def handle(req: Received) -> JSON:
        call = req.json() or {}
        if (call.get("answer") or {}).get("ok"):
            return {"output": "action performed"}
        return {"output": "", "pending": {"id": "deploy-approval", "kind": "approval", "prompt": "approve?",
                                          "expires_at": expires_at}}

    return handle


def webhook_agent(url: str) -> pb.AgentDef:
    tool = pb.ToolDef(name="deploy", description="deploys after approval", source="webhook",
                      input_schema=struct({"type": "object", "properties": {}}), http=pb.HttpConfig(url=url))
    return pb.AgentDef(name="deployer", does="deploys", tools=[tool])


def suspend(stub: pb_grpc.AgentRuntimeStub, agent: pb.AgentDef, model: ScriptedModelServer,
            ttl_ms: int = 0) -> tuple[str, str, pb.Request]:
    new = pb.NewRequest(agents=[agent], llm=openai_llm(model.url),
                        options=pb.RuntimeOptions(pending_ttl_ms=ttl_ms))
    rid = stub.New(new, timeout=10).runtime_id
    handle = stub.Spawn(pb.SpawnRequest(runtime_id=rid, agent=agent.name), timeout=10).handle
    stub.Wake(pb.WakeRequest(runtime_id=rid, handle=handle, prompt="go"), timeout=10)
    result = stub.Wait(pb.WaitRequest(runtime_id=rid, handle=handle, timeout_ms=20_000), timeout=30)
    assert result.status == "pending", result
    return rid, handle, result.pending


def settled(stub: pb_grpc.AgentRuntimeStub, rid: str, handle: str,
            until: float) -> tuple[pb.HandleSnapshot, float]:
    """Poll the handle until it is idle again (or ``until``, a wall time, passes): (snapshot, when)."""
    while True:
        try:
            snap = stub.Snapshot(pb.SnapshotRequest(runtime_id=rid, handle=handle), timeout=10)
        except grpc.RpcError as err:  # in a cluster: the runtime's lease is moving
            if err.code() is not grpc.StatusCode.UNAVAILABLE or time.time() > until:
                raise
            time.sleep(0.1)
            continue
        now = time.time()
        if snap.state == "idle" or now > until:
            return snap, now
        time.sleep(0.02)


def model_read(model: ScriptedModelServer) -> list[str]:
    """What the model was given as tool results in its last call."""
    return [m.get("content") for m in model.requests[-1]["messages"] if m.get("role") == "tool"]


def deadline_of(request: pb.Request) -> float:
    when = parse_rfc3339(request.expires_at)
    assert when is not None, request
    return when


def test_pending_ttl_declines_an_unanswered_suspension_on_time(daemon: DaemonProcess,
                                                               model_server: ScriptedModelServer) -> None:
    """pending_ttl_ms=1000 gives the approval request a deadline a second ahead; nobody answers;
    the handle finishes with the model having read the expiry decline."""
    channel, stub = open_stub(daemon.target)
    with channel:
        before = time.time()
        rid, handle, request = suspend(stub, approval_agent("approver", model_server.approval_url),
                                       model_server, ttl_ms=1000)
        deadline = deadline_of(request)
        assert before + 0.9 <= deadline <= time.time() + 1.1, "now + ttl, written before it was announced"
        snap, finished = settled(stub, rid, handle, deadline + LATE_S + 5)
        assert (snap.state, snap.last_result.text) == ("idle", DECLINED)
        assert deadline <= finished <= deadline + LATE_S, f"{finished - deadline:.3f}s after the deadline"
        assert model_read(model_server) == [DECLINED]
        stream = stub.Watch(pb.WatchRequest(runtime_id=rid, types=["resumed"], handle=handle), timeout=10)
        resumed = next(iter(stream))
        stream.cancel()
        assert dict(resumed.data) == {"request_id": request.id, "ok": False}
        code, details = code_of(lambda: stub.Resume(pb.ResumeRequest(
            runtime_id=rid, answer=pb.Answer(id=request.id, ok=True)), timeout=10))
        assert code is grpc.StatusCode.FAILED_PRECONDITION and "expired" in details


def test_a_request_s_own_expires_at_fires(daemon: DaemonProcess, model_server: ScriptedModelServer) -> None:
    expires_at = rfc3339(time.time() + 1.5)
    model_server.route("/deploy", expiring_webhook(expires_at))
    channel, stub = open_stub(daemon.target)
    with channel:
        rid, handle, request = suspend(stub, webhook_agent(model_server.origin + "/deploy"), model_server)
        assert request.expires_at == expires_at
        deadline = deadline_of(request)
        time.sleep(max(0.0, deadline - time.time() - 0.3))
        early = stub.Snapshot(pb.SnapshotRequest(runtime_id=rid, handle=handle), timeout=10)
        assert early.state == "suspended", "nothing fires before the deadline"
        snap, finished = settled(stub, rid, handle, deadline + LATE_S + 5)
        assert (snap.state, snap.last_result.text) == ("idle", DECLINED)
        assert deadline <= finished <= deadline + LATE_S
        assert model_read(model_server) == [DECLINED]


def test_a_daemon_started_after_the_deadline_fires_it_at_start(tmp_path: Path,
                                                               model_server: ScriptedModelServer) -> None:
    """Durable: the daemon is down when the deadline passes; the next one declines it as it starts."""
    proc = DaemonProcess(tmp_path / "data").start()
    try:
        channel, stub = open_stub(proc.target)
        with channel:
            rid, handle, request = suspend(stub, approval_agent("approver", model_server.approval_url),
                                           model_server, ttl_ms=1000)
        proc.stop()
        time.sleep(max(0.0, deadline_of(request) - time.time() + 0.5))
        calls = model_server.calls
        proc.start()
        started = time.time()
        channel, stub = open_stub(proc.target)
        with channel:
            snap, finished = settled(stub, rid, handle, started + LATE_S + 5)
            assert (snap.state, snap.last_result.text) == ("idle", DECLINED)
            assert finished - started <= LATE_S
            assert model_server.calls == calls + 1 and model_read(model_server) == [DECLINED]
        assert proc.has_logged("suspension expired")
    finally:
        proc.stop()


@pytest.mark.parametrize("ttl", [-1, 10 ** 15])
def test_a_negative_or_absurd_ttl_is_invalid(daemon: DaemonProcess, model_server: ScriptedModelServer,
                                             ttl: int) -> None:
    channel, stub = open_stub(daemon.target)
    with channel:
        new = pb.NewRequest(agents=[approval_agent("approver", model_server.approval_url)],
                            llm=openai_llm(model_server.url), options=pb.RuntimeOptions(pending_ttl_ms=ttl))
        code, details = code_of(lambda: stub.New(new, timeout=10))
        assert code is grpc.StatusCode.INVALID_ARGUMENT and "options.pending_ttl_ms" in details



def test_the_daemon_that_takes_a_runtime_over_fires_its_deadline(pg_dsn: str, tmp_path: Path,
                                                                model_server: ScriptedModelServer) -> None:
    """A cluster of two on one database: the owner is killed while the suspension waits; the
    survivor takes the runtime over (its sweeper, nobody calls) and declines it at the deadline."""
    a, b = Node("a", pg_dsn, tmp_path), Node("b", pg_dsn, tmp_path)
    try:
        a.start()
        rid, handle, request = suspend(a.stub, approval_agent("approver", model_server.approval_url),
                                       model_server, ttl_ms=6000)
        b.start()
        a.proc.kill9()
        deadline = deadline_of(request)
        time.sleep(max(0.0, deadline - time.time() + 1.0))  # no call names the runtime meanwhile
        snap, _ = settled(b.stub, rid, handle, deadline + LATE_S + 10)
        assert (snap.state, snap.last_result.text) == ("idle", DECLINED)
        stream = b.stub.Watch(pb.WatchRequest(runtime_id=rid, types=["resumed"], handle=handle), timeout=10)
        resumed = next(iter(stream))
        stream.cancel()
        fired_at = parse_rfc3339(resumed.at)
        assert fired_at is not None and deadline <= fired_at <= deadline + LATE_S, resumed
        assert _owner(pg_dsn, rid) == ("b", 2)
        assert b.proc.has_logged("suspension expired")
    finally:
        a.close()
        b.close()
