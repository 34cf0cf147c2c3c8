"""The worker channel: native tools and worker-style model calls served by a real Connect stream."""

from __future__ import annotations

from tests.support.grpc_client import Worker, as_dict, native_agent, openai_llm, struct, wait_until
from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_daemon.api._gen import runtime_pb2_grpc as pb_grpc
from toolnexus_devtools import ScriptedModelServer
from toolnexus_devtools.model_server import chat_response, mock_model, tool_call


def _start(stub: pb_grpc.AgentRuntimeStub, new: pb.NewRequest, agent: str) -> tuple[str, str]:
    rid = stub.New(new, timeout=5).runtime_id
    handle = stub.Spawn(pb.SpawnRequest(runtime_id=rid, agent=agent), timeout=5).handle
    return rid, handle


def _wake_and_wait(stub: pb_grpc.AgentRuntimeStub, rid: str, handle: str) -> pb.TaskResult:
    stub.Wake(pb.WakeRequest(runtime_id=rid, handle=handle, prompt="go"), timeout=5)
    return stub.Wait(pb.WaitRequest(runtime_id=rid, handle=handle, timeout_ms=10_000), timeout=15)


def test_a_native_tool_with_no_worker_fails_as_a_result_naming_the_tool(stub: pb_grpc.AgentRuntimeStub,
                                                                        model: ScriptedModelServer) -> None:
    """After tool_timeout_ms the call is an error result the model reads, not a stuck turn."""
    new = pb.NewRequest(agents=[native_agent("looker", "lookup")], llm=openai_llm(model.url),
                        options=pb.RuntimeOptions(tool_timeout_ms=300))
    rid, handle = _start(stub, new, "looker")
    result = _wake_and_wait(stub, rid, handle)
    # the mock model answers with the tool message's content: the executor's error text
    assert result.status == "done"
    assert 'native tool "lookup"' in result.text and "Connect" in result.text
    tool_message = model.requests[-1]["messages"][-1]
    assert tool_message["role"] == "tool" and "lookup" in tool_message["content"]


def test_a_connected_worker_serves_native_tool_calls(stub: pb_grpc.AgentRuntimeStub,
                                                     model: ScriptedModelServer) -> None:
    """The worker gets a ToolCall with a daemon-unique call_id and the arguments as a Struct."""
    model.push(chat_response(tool_calls=[tool_call("lookup", {"q": "tea", "n": 2})]))
    new = pb.NewRequest(agents=[native_agent("looker", "lookup")], llm=openai_llm(model.url))
    rid, handle = _start(stub, new, "looker")

    def serve(call: pb.ToolCall) -> pb.ToolOutcome:
        args = as_dict(call.arguments)
        return pb.ToolOutcome(call_id=call.call_id, output=f"found {args['q']} x{int(args['n'])}")

    worker = Worker(stub, rid, tool=serve)
    try:
        assert worker.welcome is not None and worker.welcome.runtime_id == rid
        result = _wake_and_wait(stub, rid, handle)
    finally:
        worker.close()
    assert (result.status, result.text) == ("done", "found tea x2")
    [call] = [m.tool_call for m in worker.received]
    assert call.tool == "lookup" and call.handle == handle and call.call_id != "call_1"


def test_worker_style_model_calls_go_to_the_worker(stub: pb_grpc.AgentRuntimeStub) -> None:
    """With llm.style worker the chat request body reaches the worker, and its reply drives the turn."""
    new = pb.NewRequest(agents=[native_agent("looker", "lookup")], llm=pb.LlmConfig(style="worker"))
    rid, handle = _start(stub, new, "looker")

    def serve(call: pb.ToolCall) -> pb.ToolOutcome:
        return pb.ToolOutcome(call_id=call.call_id, output="from the worker", metadata=struct({"k": 1}))

    worker = Worker(stub, rid, tool=serve, llm=mock_model)
    try:
        result = _wake_and_wait(stub, rid, handle)
    finally:
        worker.close()
    assert (result.status, result.text) == ("done", "from the worker")
    kinds = [m.WhichOneof("msg") for m in worker.received]
    assert kinds == ["llm_call", "tool_call", "llm_call"]
    first_body = as_dict(worker.received[0].llm_call.body)
    assert first_body["tools"][0]["function"]["name"] == "lookup"


def test_a_tool_call_waits_for_a_worker_that_connects_late(stub: pb_grpc.AgentRuntimeStub,
                                                           model: ScriptedModelServer) -> None:
    """A call made before any worker is connected is delivered to the first one that connects."""
    new = pb.NewRequest(agents=[native_agent("looker", "lookup")], llm=openai_llm(model.url),
                        options=pb.RuntimeOptions(tool_timeout_ms=10_000))
    rid, handle = _start(stub, new, "looker")
    stub.Wake(pb.WakeRequest(runtime_id=rid, handle=handle, prompt="go"), timeout=5)
    wait_until(lambda: model.calls >= 1)
    worker = Worker(stub, rid, tool=lambda c: pb.ToolOutcome(call_id=c.call_id, output="late but fine"))
    try:
        result = stub.Wait(pb.WaitRequest(runtime_id=rid, handle=handle, timeout_ms=10_000), timeout=15)
    finally:
        worker.close()
    assert (result.status, result.text) == ("done", "late but fine")
