"""Model calls over HTTP through the daemon: retries of transient failures, a failure that ends the turn."""

from __future__ import annotations

from tests.support.grpc_client import openai_llm
from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_daemon.api._gen import runtime_pb2_grpc as pb_grpc
from toolnexus_devtools import Reply, ScriptedModelServer
from toolnexus_devtools.model_server import chat_response

OVERLOADED = {"error": {"message": "overloaded"}}


def _run(stub: pb_grpc.AgentRuntimeStub, model: ScriptedModelServer, retries: int) -> pb.TaskResult:
    """One wake of a tool-less agent; its settled result."""
    agent = pb.AgentDef(name="talker", does="talks")
    llm = openai_llm(model.url, retries=retries)
    rid = stub.New(pb.NewRequest(agents=[agent], llm=llm), timeout=5).runtime_id
    handle = stub.Spawn(pb.SpawnRequest(runtime_id=rid, agent="talker"), timeout=5).handle
    stub.Wake(pb.WakeRequest(runtime_id=rid, handle=handle, prompt="hello"), timeout=5)
    return stub.Wait(pb.WaitRequest(runtime_id=rid, handle=handle, timeout_ms=10_000), timeout=15)


def test_a_503_is_retried_then_the_turn_succeeds(stub: pb_grpc.AgentRuntimeStub,
                                                 model: ScriptedModelServer) -> None:
    model.push(Reply(503, OVERLOADED), chat_response("recovered", usage=(1, 1, 2)))
    result = _run(stub, model, retries=2)
    assert (result.status, result.text) == ("done", "recovered")
    assert model.calls == 2


def test_a_429_with_retry_after_zero_is_retried_at_once(stub: pb_grpc.AgentRuntimeStub,
                                                        model: ScriptedModelServer) -> None:
    model.push(Reply(429, {"error": {"message": "slow down"}}, headers={"Retry-After": "0"}),
               chat_response("after the limit"))
    result = _run(stub, model, retries=1)
    assert (result.status, result.text) == ("done", "after the limit")
    assert model.calls == 2


def test_a_400_is_not_retried_and_ends_the_turn_with_error(stub: pb_grpc.AgentRuntimeStub,
                                                           model: ScriptedModelServer) -> None:
    model.push(Reply(400, {"error": {"message": "bad tools schema"}}))
    result = _run(stub, model, retries=3)
    assert (result.status, result.is_error) == ("error", True)
    assert "HTTP 400" in result.text and "bad tools schema" in result.text
    assert model.calls == 1


def test_retries_minus_one_means_a_single_attempt(stub: pb_grpc.AgentRuntimeStub,
                                                  model: ScriptedModelServer) -> None:
    model.push(Reply(503, OVERLOADED), chat_response("never reached"))
    result = _run(stub, model, retries=-1)
    assert result.status == "error"
    assert "HTTP 503" in result.text
    assert model.calls == 1


def test_request_params_reach_the_model_with_integers_kept(stub: pb_grpc.AgentRuntimeStub,
                                                           model: ScriptedModelServer) -> None:
    """Struct numbers are doubles on the wire; integral ones reach the model as JSON integers."""
    llm = openai_llm(model.url)
    llm.request_params.update({"max_tokens": 64, "temperature": 0.5})
    agent = pb.AgentDef(name="talker", does="talks")
    rid = stub.New(pb.NewRequest(agents=[agent], llm=llm), timeout=5).runtime_id
    handle = stub.Spawn(pb.SpawnRequest(runtime_id=rid, agent="talker"), timeout=5).handle
    stub.Wake(pb.WakeRequest(runtime_id=rid, handle=handle, prompt="hello"), timeout=5)
    stub.Wait(pb.WaitRequest(runtime_id=rid, handle=handle, timeout_ms=10_000), timeout=15)
    raw = model.received[-1].body.decode()
    assert '"max_tokens": 64' in raw or '"max_tokens":64' in raw
    assert model.requests[-1]["temperature"] == 0.5
