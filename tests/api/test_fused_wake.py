"""Fused calls over gRPC: Spawn with a prompt (spawn and wake in one commit) and Wake with
wait_ms (the wake and the wait for its turn's result in one call), against the real daemon."""

from __future__ import annotations

import time
from collections.abc import Iterator

import grpc
import pytest

from tests.support.grpc_client import approval_agent, code_of, openai_llm
from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_daemon.api._gen import runtime_pb2_grpc as pb_grpc
from toolnexus_daemon.api.limits import MAX_WAIT_MS
from toolnexus_daemon.config import DEFAULT_MAX_PROMPT_BYTES
from toolnexus_daemon.model import JSON
from toolnexus_devtools import ScriptedModelServer, mock_model

INVALID = grpc.StatusCode.INVALID_ARGUMENT


def _runtime(stub: pb_grpc.AgentRuntimeStub, model: ScriptedModelServer) -> str:
    new = pb.NewRequest(agents=[approval_agent("approver", model.approval_url)], llm=openai_llm(model.url))
    return str(stub.New(new, timeout=5).runtime_id)


def _events(stub: pb_grpc.AgentRuntimeStub, rid: str, handle: str) -> list[pb.Event]:
    """The stored events of ``handle`` (Watch replays them; the call's deadline ends the follow)."""
    got: list[pb.Event] = []
    try:
        for event in stub.Watch(pb.WatchRequest(runtime_id=rid, handle=handle), timeout=1.0):
            got.append(event)
    except grpc.RpcError as err:
        assert err.code() is grpc.StatusCode.DEADLINE_EXCEEDED
    return got


def test_a_fused_spawn_returns_the_settled_result_and_resume_finishes_it(
        stub: pb_grpc.AgentRuntimeStub, model: ScriptedModelServer) -> None:
    rid = _runtime(stub, model)
    out = stub.Spawn(pb.SpawnRequest(runtime_id=rid, agent="approver", prompt="do it", wait_ms=10_000),
                     timeout=15)
    assert (out.handle, out.queued) == ("root/approver.1", False)
    assert (out.result.status, out.result.pending.kind) == ("pending", "approval")
    snap = stub.Snapshot(pb.SnapshotRequest(runtime_id=rid, handle=out.handle), timeout=5)
    assert (snap.state, snap.pending.id) == ("suspended", out.result.pending.id)
    kinds = [(e.type, e.to_state) for e in _events(stub, rid, out.handle)]
    assert kinds[:2] == [("spawned", ""), ("transition", "running")]
    # the same result Wait gives right after
    again = stub.Wait(pb.WaitRequest(runtime_id=rid, handle=out.handle, timeout_ms=1000), timeout=5)
    assert again == out.result
    answer = pb.Answer(id=out.result.pending.id, ok=True)
    resumed = stub.Resume(pb.ResumeRequest(runtime_id=rid, answer=answer), timeout=15)
    assert (resumed.result.status, resumed.result.text) == ("done", "action performed")


def test_a_fused_spawn_without_wait_returns_once_durable(stub: pb_grpc.AgentRuntimeStub,
                                                         model: ScriptedModelServer) -> None:
    rid = _runtime(stub, model)
    out = stub.Spawn(pb.SpawnRequest(runtime_id=rid, agent="approver", prompt="do it"), timeout=5)
    assert not out.HasField("result")
    result = stub.Wait(pb.WaitRequest(runtime_id=rid, handle=out.handle, timeout_ms=10_000), timeout=15)
    assert result.status == "pending"


def test_wake_with_wait_ms_returns_the_turn_result(stub: pb_grpc.AgentRuntimeStub,
                                                   model: ScriptedModelServer) -> None:
    rid = _runtime(stub, model)
    handle = stub.Spawn(pb.SpawnRequest(runtime_id=rid, agent="approver"), timeout=5).handle
    out = stub.Wake(pb.WakeRequest(runtime_id=rid, handle=handle, prompt="go", wait_ms=10_000), timeout=15)
    assert (out.queued, out.result.status, out.result.pending.kind) == (False, "pending", "approval")
    snap = stub.Snapshot(pb.SnapshotRequest(runtime_id=rid, handle=handle), timeout=5)
    assert (snap.state, snap.pending.id) == ("suspended", out.result.pending.id)


@pytest.fixture
def slow_model() -> Iterator[ScriptedModelServer]:
    """The reference mock model answering after 0.5 s, so a short wait times out for sure."""
    def slow(body: JSON) -> JSON:
        time.sleep(0.5)
        return mock_model(body)

    with ScriptedModelServer(slow) as srv:
        yield srv


def test_a_fused_wait_that_times_out_answers_like_wait(stub: pb_grpc.AgentRuntimeStub,
                                                       slow_model: ScriptedModelServer) -> None:
    rid = _runtime(stub, slow_model)
    out = stub.Spawn(pb.SpawnRequest(runtime_id=rid, agent="approver", prompt="go", wait_ms=50), timeout=5)
    expected = ("timeout", "wait timeout after 50ms (child still running)")
    assert (out.result.status, out.result.text) == expected
    later = stub.Wait(pb.WaitRequest(runtime_id=rid, handle=out.handle, timeout_ms=10_000), timeout=15)
    assert later.status == "pending", "the turn kept running past the timeout"


@pytest.mark.parametrize(("request_", "needle"), [
    (pb.SpawnRequest(agent="approver", prompt="x", wait_ms=-1), "wait_ms is -1; it must not be negative"),
    (pb.SpawnRequest(agent="approver", prompt="x", wait_ms=MAX_WAIT_MS + 1),
     f"wait_ms is {MAX_WAIT_MS + 1}; the limit is {MAX_WAIT_MS}"),
    (pb.SpawnRequest(agent="approver", wait_ms=1000), "wait_ms waits for the turn a prompt starts"),
    (pb.SpawnRequest(agent="approver", prompt="x" * (DEFAULT_MAX_PROMPT_BYTES + 1)),
     f"prompt is {DEFAULT_MAX_PROMPT_BYTES + 1} bytes; the limit is {DEFAULT_MAX_PROMPT_BYTES}"),
    (pb.WakeRequest(handle="root/approver.1", prompt="x", wait_ms=-5),
     "wait_ms is -5; it must not be negative"),
    (pb.WakeRequest(handle="root/approver.1", prompt="x", wait_ms=MAX_WAIT_MS + 1), "Wait (timeout_ms 0"),
])
def test_bad_fused_inputs_are_invalid_argument(stub: pb_grpc.AgentRuntimeStub, model: ScriptedModelServer,
                                               request_: pb.SpawnRequest | pb.WakeRequest,
                                               needle: str) -> None:
    rid = _runtime(stub, model)
    stub.Spawn(pb.SpawnRequest(runtime_id=rid, agent="approver"), timeout=5)
    request_.runtime_id = rid
    method = stub.Spawn if isinstance(request_, pb.SpawnRequest) else stub.Wake
    code, details = code_of(lambda: method(request_, timeout=5))
    assert (code, needle in details) == (INVALID, True), details
    assert len(stub.List(pb.ListRequest(runtime_id=rid), timeout=5).handles) == 1, "nothing was spawned"


def test_fused_calls_keep_the_errors_of_spawn_and_wake(stub: pb_grpc.AgentRuntimeStub,
                                                       model: ScriptedModelServer) -> None:
    rid = _runtime(stub, model)
    code, details = code_of(lambda: stub.Spawn(
        pb.SpawnRequest(runtime_id=rid, agent="nope", prompt="x", wait_ms=1000), timeout=5))
    assert (code, details) == (grpc.StatusCode.NOT_FOUND, 'unknown agent "nope" (known: approver)')
    code, _ = code_of(lambda: stub.Spawn(
        pb.SpawnRequest(runtime_id="no-such-runtime", agent="approver", prompt="x"), timeout=5))
    assert code is grpc.StatusCode.NOT_FOUND
    fused = pb.SpawnRequest(runtime_id=rid, agent="approver", prompt="go", wait_ms=10_000)
    out = stub.Spawn(fused, timeout=15)
    code, details = code_of(lambda: stub.Wake(
        pb.WakeRequest(runtime_id=rid, handle=out.handle, prompt="again", wait_ms=1000), timeout=5))
    assert (code, out.result.pending.id in details) == (grpc.StatusCode.FAILED_PRECONDITION, True)
    code, _ = code_of(lambda: stub.Wake(
        pb.WakeRequest(runtime_id=rid, handle="root/ghost.9", prompt="x", wait_ms=1000), timeout=5))
    assert code is grpc.StatusCode.NOT_FOUND
