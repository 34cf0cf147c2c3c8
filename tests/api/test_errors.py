"""Refusals cross the wire as the pinned status codes with messages a caller can act on."""

from __future__ import annotations

import grpc

from tests.support.grpc_client import approval_agent, code_of, native_agent, openai_llm
from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_daemon.api._gen import runtime_pb2_grpc as pb_grpc

LLM = openai_llm("http://127.0.0.1:9/v1")


def _new(stub: pb_grpc.AgentRuntimeStub, *agents: pb.AgentDef, **kw: object) -> str:
    return str(stub.New(pb.NewRequest(agents=list(agents), llm=LLM, **kw), timeout=5).runtime_id)


def test_a_bad_registry_is_invalid_argument_naming_every_problem(stub: pb_grpc.AgentRuntimeStub) -> None:
    """Conversion problems (unknown source/style) and registry problems come back together."""
    bad_tool = pb.ToolDef(name="t", source="carrier-pigeon")
    no_url = pb.ToolDef(name="hook", source="webhook")
    agents = [pb.AgentDef(name="a", tools=[bad_tool], team=["ghost"]), pb.AgentDef(name="a"),
              pb.AgentDef(name="b", tools=[no_url])]
    llm = pb.LlmConfig(style="telepathy", base_url="http://127.0.0.1:9/v1", model="m")
    code, details = code_of(lambda: stub.New(pb.NewRequest(agents=agents, llm=llm), timeout=5))
    assert code is grpc.StatusCode.INVALID_ARGUMENT
    for problem in ('unknown source "carrier-pigeon"', 'unknown llm.style "telepathy"',
                    'agent name "a" is used more than once', 'team names unknown agent "ghost"',
                    'tool "hook" has source webhook but no http.url'):
        assert problem in details, details


def test_unknown_runtime_is_not_found(stub: pb_grpc.AgentRuntimeStub) -> None:
    code, details = code_of(lambda: stub.Snapshot(pb.SnapshotRequest(runtime_id="rt-nope", handle="root"),
                                                  timeout=5))
    assert code is grpc.StatusCode.NOT_FOUND
    assert '"rt-nope"' in details


def test_a_missing_runtime_id_is_invalid_argument(stub: pb_grpc.AgentRuntimeStub) -> None:
    code, _ = code_of(lambda: stub.Wait(pb.WaitRequest(handle="root"), timeout=5))
    assert code is grpc.StatusCode.INVALID_ARGUMENT


def test_spawn_of_an_unknown_agent_is_not_found_listing_the_known(stub: pb_grpc.AgentRuntimeStub) -> None:
    rid = _new(stub, native_agent("b", "x"), approval_agent("a", "http://127.0.0.1:9/hook"))
    code, details = code_of(lambda: stub.Spawn(pb.SpawnRequest(runtime_id=rid, agent="x"), timeout=5))
    assert code is grpc.StatusCode.NOT_FOUND
    assert details == 'unknown agent "x" (known: a, b)'


def test_connect_without_hello_is_invalid_argument(stub: pb_grpc.AgentRuntimeStub) -> None:
    first = pb.WorkerMessage(tool_outcome=pb.ToolOutcome(call_id="c1", output="early"))
    code, details = code_of(lambda: list(stub.Connect(iter([first]), timeout=5)))
    assert code is grpc.StatusCode.INVALID_ARGUMENT
    assert details == "first message must be hello"


def test_connect_to_an_unknown_runtime_is_not_found(stub: pb_grpc.AgentRuntimeStub) -> None:
    hello = pb.WorkerMessage(hello=pb.WorkerHello(runtime_id="rt-ghost", worker_id="w"))
    code, _ = code_of(lambda: list(stub.Connect(iter([hello]), timeout=5)))
    assert code is grpc.StatusCode.NOT_FOUND


def test_watch_with_an_unknown_event_type_is_invalid_argument(stub: pb_grpc.AgentRuntimeStub) -> None:
    rid = _new(stub, native_agent("a", "x"))
    request = pb.WatchRequest(runtime_id=rid, types=["transition", "telegram"])
    code, details = code_of(lambda: list(stub.Watch(request, timeout=5)))
    assert code is grpc.StatusCode.INVALID_ARGUMENT
    assert '"telegram"' in details


def test_a_runtime_key_is_required_on_every_call(stub: pb_grpc.AgentRuntimeStub) -> None:
    """A keyed runtime refuses calls without the key (Watch and Connect too) and accepts it."""
    rid = _new(stub, native_agent("a", "x"), runtime_key="s3cret")
    snapshot = pb.SnapshotRequest(runtime_id=rid, handle="root")
    code, _ = code_of(lambda: stub.Snapshot(snapshot, timeout=5))
    assert code is grpc.StatusCode.PERMISSION_DENIED
    code, _ = code_of(lambda: list(stub.Watch(pb.WatchRequest(runtime_id=rid), timeout=5)))
    assert code is grpc.StatusCode.PERMISSION_DENIED
    hello = pb.WorkerMessage(hello=pb.WorkerHello(runtime_id=rid))
    code, _ = code_of(lambda: list(stub.Connect(iter([hello]), timeout=5)))
    assert code is grpc.StatusCode.PERMISSION_DENIED
    key = (("x-toolnexus-runtime-key", "s3cret"),)
    assert stub.Snapshot(snapshot, metadata=key, timeout=5).id == "root"
