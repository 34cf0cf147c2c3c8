"""A durable suspension and its Resume over gRPC: real model server, real approval webhook."""

from __future__ import annotations

import grpc

from tests.support.grpc_client import approval_agent, code_of, openai_llm
from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_daemon.api._gen import runtime_pb2_grpc as pb_grpc
from toolnexus_devtools import ScriptedModelServer


def _suspended(stub: pb_grpc.AgentRuntimeStub, model: ScriptedModelServer) -> tuple[str, str, pb.TaskResult]:
    """A runtime with one handle suspended on the approval webhook: (runtime, handle, pending result)."""
    new = pb.NewRequest(agents=[approval_agent("approver", model.approval_url)], llm=openai_llm(model.url))
    rid = stub.New(new, timeout=5).runtime_id
    handle = stub.Spawn(pb.SpawnRequest(runtime_id=rid, agent="approver"), timeout=5).handle
    stub.Wake(pb.WakeRequest(runtime_id=rid, handle=handle, prompt="do the thing"), timeout=5)
    result = stub.Wait(pb.WaitRequest(runtime_id=rid, handle=handle, timeout_ms=10_000), timeout=15)
    return rid, handle, result


def test_suspend_then_resume_continues_from_the_checkpoint(stub: pb_grpc.AgentRuntimeStub,
                                                          model: ScriptedModelServer) -> None:
    """Wait reports the approval request; Resume ok runs the tool again and the turn ends done."""
    rid, handle, pending = _suspended(stub, model)
    assert handle == "root/approver.1"
    assert (pending.status, pending.is_error, pending.pending.kind) == ("pending", False, "approval")
    assert pending.pending.id and pending.pending.prompt == "approve?"
    snap = stub.Snapshot(pb.SnapshotRequest(runtime_id=rid, handle=handle), timeout=5)
    assert (snap.state, snap.pending.id, snap.parent) == ("suspended", pending.pending.id, "root")
    calls_before = model.calls

    answer = pb.Answer(id=pending.pending.id, ok=True)
    out = stub.Resume(pb.ResumeRequest(runtime_id=rid, answer=answer), timeout=15)
    assert (out.handle, out.duplicate) == (handle, False)
    assert (out.result.status, out.result.text, out.result.is_error) == ("done", "action performed", False)
    snap = stub.Snapshot(pb.SnapshotRequest(runtime_id=rid, handle=handle), timeout=5)
    assert (snap.state, snap.last_result.text) == ("idle", "action performed")
    assert not snap.HasField("pending")
    # the checkpoint held the model's tool call: only the final answer needed a new model call
    assert model.calls == calls_before + 1
    assert snap.usage_total == snap.usage.total_tokens > 0


def test_wake_on_a_suspended_handle_names_the_request(stub: pb_grpc.AgentRuntimeStub,
                                                       model: ScriptedModelServer) -> None:
    rid, handle, pending = _suspended(stub, model)
    code, details = code_of(lambda: stub.Wake(pb.WakeRequest(runtime_id=rid, handle=handle, prompt="again"),
                                              timeout=5))
    assert code is grpc.StatusCode.FAILED_PRECONDITION
    assert pending.pending.id in details


def test_resume_routing_unknown_duplicate_and_conflicting_answers(stub: pb_grpc.AgentRuntimeStub,
                                                                  model: ScriptedModelServer) -> None:
    """Unknown id → NOT_FOUND; the same answer again → duplicate, no change; another answer → refused."""
    rid, handle, pending = _suspended(stub, model)
    unknown = pb.ResumeRequest(runtime_id=rid, answer=pb.Answer(id="nope", ok=True))
    code, _ = code_of(lambda: stub.Resume(unknown, timeout=5))
    assert code is grpc.StatusCode.NOT_FOUND

    answer = pb.Answer(id=pending.pending.id, ok=True)
    first = stub.Resume(pb.ResumeRequest(runtime_id=rid, answer=answer), timeout=15)
    assert first.result.status == "done"
    before = stub.Snapshot(pb.SnapshotRequest(runtime_id=rid, handle=handle), timeout=5)
    calls = model.calls

    again = stub.Resume(pb.ResumeRequest(runtime_id=rid, answer=answer), timeout=15)
    assert again.duplicate
    assert stub.Snapshot(pb.SnapshotRequest(runtime_id=rid, handle=handle), timeout=5) == before
    assert model.calls == calls

    declined = pb.Answer(id=pending.pending.id, ok=False, reason="declined")
    code, _ = code_of(lambda: stub.Resume(pb.ResumeRequest(runtime_id=rid, answer=declined), timeout=5))
    assert code is grpc.StatusCode.FAILED_PRECONDITION


def test_resume_without_an_answer_id_is_invalid_argument(stub: pb_grpc.AgentRuntimeStub,
                                                         model: ScriptedModelServer) -> None:
    rid, _, _ = _suspended(stub, model)
    no_id = pb.ResumeRequest(runtime_id=rid, answer=pb.Answer(ok=True))
    code, _ = code_of(lambda: stub.Resume(no_id, timeout=5))
    assert code is grpc.StatusCode.INVALID_ARGUMENT


def test_list_shows_the_handles_of_a_runtime(stub: pb_grpc.AgentRuntimeStub,
                                             model: ScriptedModelServer) -> None:
    rid, handle, _ = _suspended(stub, model)
    listed = stub.List(pb.ListRequest(runtime_id=rid), timeout=5)
    assert [h.id for h in listed.handles] == [handle]
    assert listed.handles[0].state == "suspended"


def test_interrupt_says_which_request_it_cancelled(stub: pb_grpc.AgentRuntimeStub,
                                                   model: ScriptedModelServer) -> None:
    """Interrupt of a suspended handle answers what it did: the state it left and the cancelled id."""
    rid, handle, pending = _suspended(stub, model)
    interrupt = pb.InterruptRequest(runtime_id=rid, handle=handle)
    done = stub.Interrupt(interrupt, timeout=5)
    assert (done.from_state, done.cancelled_request) == ("suspended", pending.pending.id)
    assert done.inbox_restored == 0
    code, details = code_of(lambda: stub.Interrupt(interrupt, timeout=5))
    assert code is grpc.StatusCode.FAILED_PRECONDITION and "idle" in details
