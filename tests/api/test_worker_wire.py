"""The wire edge of the relay: protobuf worker messages become the relay's typed messages and back
(docs/protocol.md §6), and hostile replies (the wrong kind for the call, an unknown call id, a value
the daemon refuses) end as they did when replies travelled as JSON dicts."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from tests.support.daemon import DaemonProcess
from tests.support.grpc_client import Worker, native_agent, open_stub, openai_llm, struct, wait_until
from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_daemon.api._gen import runtime_pb2_grpc as pb_grpc
from toolnexus_daemon.api.convert import from_struct
from toolnexus_daemon.api.worker_channel import daemon_message, worker_reply
from toolnexus_daemon.errors import InvalidArgument
from toolnexus_daemon.model import Answer, Request, ToolResult
from toolnexus_daemon.relay import (
    CallKind,
    ModelCallOut,
    ModelReplyIn,
    ResolutionIn,
    ResolveOut,
    ToolCallOut,
    ToolOutcomeIn,
    refused,
)
from toolnexus_devtools import ScriptedModelServer
from toolnexus_devtools.model_server import chat_response, tool_call

# ---------------------------------------------------------------- typed <-> protobuf


def test_a_tool_call_goes_out_with_its_arguments_answer_and_action_id() -> None:
    out = ToolCallOut("rt/h/s1c0", "root/a.1", "lookup", {"q": "tea"}, Answer("r1", True, {"v": 1}))
    call = daemon_message(out).tool_call
    assert (call.call_id, call.handle, call.tool) == ("rt/h/s1c0", "root/a.1", "lookup")
    assert from_struct(call.arguments) == {"q": "tea"} and call.action_id
    assert (call.answer.id, call.answer.ok, from_struct(call.answer.data)) == ("r1", True, {"v": 1})
    assert not daemon_message(ToolCallOut("c", "h", "lookup")).tool_call.HasField("answer")


def test_model_and_resolve_calls_go_out_as_their_own_messages() -> None:
    llm = daemon_message(ModelCallOut("c1", "root", {"model": "m", "messages": []})).llm_call
    assert llm.call_id == "c1" and from_struct(llm.body) == {"model": "m", "messages": []}
    request = Request(id="r9", kind="approval", prompt="ok?", data={"amount": 3})
    resolve = daemon_message(ResolveOut("c2", "root", request)).resolve
    assert (resolve.call_id, resolve.request.id, resolve.request.prompt) == ("c2", "r9", "ok?")


def test_each_reply_kind_becomes_its_typed_message() -> None:
    pending = pb.Request(id="p1", kind="approval", prompt="sure?")
    tool = worker_reply(pb.WorkerMessage(tool_outcome=pb.ToolOutcome(
        call_id="c1", output="x", is_error=True, metadata=struct({"k": 1}), pending=pending)))
    assert tool == ToolOutcomeIn("c1", ToolResult("x", True, {"k": 1}, Request("p1", "approval", "sure?")))
    llm = worker_reply(pb.WorkerMessage(llm_reply=pb.LlmReply(call_id="c2")))
    assert llm == ModelReplyIn("c2", status=200, body={}, error=""), "an unset status reads as 200"
    resolution = worker_reply(pb.WorkerMessage(resolve_reply=pb.ResolveReply(
        call_id="c3", answer=pb.Answer(ok=True, data=struct({"a": 1})))))
    assert resolution == ResolutionIn("c3", Answer("", True, {"a": 1})), "a resolver may leave the id out"


def test_a_message_that_is_no_reply_is_refused() -> None:
    with pytest.raises(InvalidArgument, match="unexpected worker message 'hello'"):
        worker_reply(pb.WorkerMessage(hello=pb.WorkerHello(runtime_id="rt")))


def test_a_refused_reply_fails_its_call_in_the_shape_of_its_kind() -> None:
    tool = refused(CallKind.TOOL, "c1", "too deep")
    assert tool == ToolOutcomeIn("c1", ToolResult("the worker's reply was refused: too deep", is_error=True))
    llm = refused(CallKind.LLM, "c2", "NaN")
    assert isinstance(llm, ModelReplyIn) and llm.error == "the worker's reply was refused: NaN"
    assert refused(CallKind.RESOLVE, "c3", "x", answer_id="r1") == ResolutionIn(
        "c3", Answer("r1", False, reason="declined"))


# ---------------------------------------------------------------- hostile replies on a real stream


class _Hostile(Worker):
    """Answers every tool call with an LlmReply and every model call with a ToolOutcome, each after
    a reply for a call id nobody sent."""

    def _handle(self, msg: pb.DaemonMessage) -> None:
        kind = msg.WhichOneof("msg")
        if kind == "welcome":
            super()._handle(msg)
            return
        self.received.append(msg)
        stray = pb.ToolOutcome(call_id="no-such-call", output="stray")
        self._outgoing.put(pb.WorkerMessage(tool_outcome=stray))
        if kind == "tool_call":
            reply = pb.LlmReply(call_id=msg.tool_call.call_id, status=200, body=struct({"x": 1}))
            self._outgoing.put(pb.WorkerMessage(llm_reply=reply))
        elif kind == "llm_call":
            outcome = pb.ToolOutcome(call_id=msg.llm_call.call_id, output="not a model reply")
            self._outgoing.put(pb.WorkerMessage(tool_outcome=outcome))


def _run(stub: pb_grpc.AgentRuntimeStub, new: pb.NewRequest, *, llm: bool) -> pb.TaskResult:
    rid = stub.New(new, timeout=5).runtime_id
    handle = stub.Spawn(pb.SpawnRequest(runtime_id=rid, agent="looker"), timeout=5).handle
    worker = _Hostile(stub, rid, llm=(lambda body: body) if llm else None)
    try:
        stub.Wake(pb.WakeRequest(runtime_id=rid, handle=handle, prompt="go"), timeout=5)
        result: pb.TaskResult = stub.Wait(pb.WaitRequest(runtime_id=rid, handle=handle, timeout_ms=10_000),
                                          timeout=15)
        return result
    finally:
        worker.close()


def test_a_tool_call_answered_with_a_model_reply_reads_as_an_empty_result(
        stub: pb_grpc.AgentRuntimeStub, model: ScriptedModelServer) -> None:
    """The stray reply for an unknown call id is ignored; the wrong-kind reply carries no outcome."""
    model.push(chat_response(tool_calls=[tool_call("lookup", {})]))
    new = pb.NewRequest(agents=[native_agent("looker", "lookup")], llm=openai_llm(model.url))
    result = _run(stub, new, llm=False)
    assert (result.status, result.is_error) == ("done", False)
    tool_message = model.requests[-1]["messages"][-1]
    assert tool_message["role"] == "tool" and tool_message["content"] == ""


def test_a_model_call_answered_with_a_tool_outcome_fails_the_turn_naming_the_missing_choices(
        stub: pb_grpc.AgentRuntimeStub) -> None:
    new = pb.NewRequest(agents=[native_agent("looker", "lookup")], llm=pb.LlmConfig(style="worker"))
    result = _run(stub, new, llm=True)
    assert result.status == "error" and "no choices" in result.text


class _Oversized(Worker):
    """Answers its tool call with an output past ``--max-message-bytes``; records how its stream ended."""

    code: grpc.StatusCode | None = None

    def _serve(self) -> None:
        try:
            for msg in self._call:
                self._handle(msg)
        except grpc.RpcError as exc:
            self.code = exc.code()


def test_an_oversized_reply_ends_its_stream_and_the_call_goes_to_the_next_worker(
        tmp_path: Path, model: ScriptedModelServer) -> None:
    """RESOURCE_EXHAUSTED for the sender; the call it held is re-sent, same call_id, and answered."""
    model.push(chat_response(tool_calls=[tool_call("lookup", {})]))
    big = "x" * (80 << 10)
    with DaemonProcess(tmp_path / "data", "--max-message-bytes", "64KiB") as proc:
        channel, stub = open_stub(proc.target)
        with channel:
            new = pb.NewRequest(agents=[native_agent("looker", "lookup")], llm=openai_llm(model.url))
            rid = stub.New(new, timeout=5).runtime_id
            handle = stub.Spawn(pb.SpawnRequest(runtime_id=rid, agent="looker"), timeout=5).handle
            first = _Oversized(stub, rid, tool=lambda c: pb.ToolOutcome(call_id=c.call_id, output=big),
                               worker_id="big")
            stub.Wake(pb.WakeRequest(runtime_id=rid, handle=handle, prompt="go"), timeout=5)
            wait_until(lambda: first.code is not None)
            second = Worker(stub, rid, tool=lambda c: pb.ToolOutcome(call_id=c.call_id, output="small"),
                            worker_id="small")
            result = stub.Wait(pb.WaitRequest(runtime_id=rid, handle=handle, timeout_ms=10_000), timeout=15)
            first.close()
            second.close()
    assert first.code is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert (result.status, result.text) == ("done", "small")
    [held] = [m.tool_call.call_id for m in first.received]
    [resent] = [m.tool_call.call_id for m in second.received]
    assert held == resent
