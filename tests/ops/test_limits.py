"""Every limit has a flag, a default, a line in Info and a precise error naming it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from google.protobuf import struct_pb2

from tests.support.daemon import DaemonProcess
from tests.support.grpc_client import Worker, code_of, native_agent, open_stub, openai_llm, struct
from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_daemon.api._gen import runtime_pb2_grpc as pb_grpc
from toolnexus_daemon.config import load
from toolnexus_devtools import ScriptedModelServer, chat_response, tool_call

LIMITS = ("--max-message-bytes", "64KiB", "--max-prompt-bytes", "1KiB", "--max-tools-per-agent", "2",
          "--max-agents", "2", "--max-struct-depth", "4", "--event-retention", "50")
CONNECT = "/toolnexus.agents.v1.AgentRuntime/Connect"
LLM = openai_llm("http://127.0.0.1:9/v1")


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    proc = DaemonProcess(tmp_path_factory.mktemp("data"), *LIMITS)
    proc.start()
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def stub(limited: DaemonProcess) -> Iterator[pb_grpc.AgentRuntimeStub]:
    channel, stub = open_stub(limited.target)
    with channel:
        yield stub


def nested(depth: int) -> struct_pb2.Struct:
    """A Struct ``depth`` levels deep: {"a": {"a": ... {"leaf": 1}}}."""
    value: dict[str, object] = {"leaf": 1}
    for _ in range(depth - 1):
        value = {"a": value}
    return struct(value)


def _runtime(stub: pb_grpc.AgentRuntimeStub, **options: int) -> tuple[str, str]:
    new = pb.NewRequest(agents=[native_agent("a", "t")], llm=LLM, options=pb.RuntimeOptions(**options))
    rid = stub.New(new, timeout=5).runtime_id
    return rid, stub.Spawn(pb.SpawnRequest(runtime_id=rid, agent="a"), timeout=5).handle


def test_defaults_and_flags_of_every_limit() -> None:
    defaults = load([], {}).limits
    assert (defaults.max_message_bytes, defaults.max_prompt_bytes, defaults.max_tools_per_agent,
            defaults.max_agents, defaults.max_struct_depth, defaults.event_retention) == (
        16 << 20, 1 << 20, 128, 256, 24, 100_000)
    env = load([], {"TOOLNEXUS_MAX_AGENTS": "9", "TOOLNEXUS_EVENT_RETENTION": "0"}).limits
    assert (env.max_agents, env.event_retention) == (9, 0)
    with pytest.raises(SystemExit):
        load(["--max-struct-depth", "40"], {})  # deeper than protobuf can parse


def test_info_reports_every_limit_in_force(stub: pb_grpc.AgentRuntimeStub) -> None:
    info = stub.Info(pb.InfoRequest(), timeout=5)
    assert {k: info.limits[k] for k in ("max_message_bytes", "max_prompt_bytes", "max_tools_per_agent",
                                        "max_agents", "max_struct_depth", "event_retention")} == {
        "max_message_bytes": 64 << 10, "max_prompt_bytes": 1 << 10, "max_tools_per_agent": 2,
        "max_agents": 2, "max_struct_depth": 4, "event_retention": 50}
    assert info.config["max-struct-depth"] == "4" and info.config["event-retention"] == "50"


def test_a_message_over_the_size_limit_is_resource_exhausted(stub: pb_grpc.AgentRuntimeStub) -> None:
    rid, handle = _runtime(stub)
    post = pb.PostRequest(runtime_id=rid, handle=handle, item=pb.InboxItem(text="x" * (80 << 10)))
    code, _ = code_of(lambda: stub.Post(post, timeout=5))
    assert code is grpc.StatusCode.RESOURCE_EXHAUSTED


def test_a_prompt_over_the_limit_names_its_size_and_flag(stub: pb_grpc.AgentRuntimeStub) -> None:
    rid, handle = _runtime(stub)
    code, details = code_of(lambda: stub.Wake(pb.WakeRequest(runtime_id=rid, handle=handle, prompt="é" * 600),
                                              timeout=5))
    assert code is grpc.StatusCode.INVALID_ARGUMENT
    assert details == "prompt is 1200 bytes; the limit is 1024 (--max-prompt-bytes)"
    post = pb.PostRequest(runtime_id=rid, handle=handle, item=pb.InboxItem(text="y" * 2000))
    code, details = code_of(lambda: stub.Post(post, timeout=5))
    assert code is grpc.StatusCode.INVALID_ARGUMENT and "item.text is 2000 bytes" in details


def test_registry_limits_are_named_with_the_other_problems(stub: pb_grpc.AgentRuntimeStub) -> None:
    tools = [pb.ToolDef(name=f"t{i}", source="native") for i in range(3)]
    agents = [pb.AgentDef(name="many", tools=tools), pb.AgentDef(name="b"), pb.AgentDef(name="c", team=["x"])]
    code, details = code_of(lambda: stub.New(pb.NewRequest(agents=agents, llm=LLM), timeout=5))
    assert code is grpc.StatusCode.INVALID_ARGUMENT
    assert "the registry defines 3 agents; the limit is 2 (--max-agents)" in details
    assert 'agent "many" declares 3 tools; the limit is 2 (--max-tools-per-agent)' in details
    assert 'team names unknown agent "x"' in details


def test_a_struct_nested_past_the_limit_is_invalid_argument(stub: pb_grpc.AgentRuntimeStub) -> None:
    rid, _ = _runtime(stub)
    resume = pb.ResumeRequest(runtime_id=rid, answer=pb.Answer(id="r", ok=True, data=nested(5)))
    code, details = code_of(lambda: stub.Resume(resume, timeout=5))
    assert code is grpc.StatusCode.INVALID_ARGUMENT
    assert details == ("a Struct in the ResumeRequest nests more than 4 levels deep; "
                       "the limit is 4 (--max-struct-depth)")
    shallow = pb.ResumeRequest(runtime_id=rid, answer=pb.Answer(id="r", ok=True, data=nested(4)))
    assert code_of(lambda: stub.Resume(shallow, timeout=5))[0] is grpc.StatusCode.NOT_FOUND
    schema = pb.ToolDef(name="t", source="native", input_schema=struct({"a": {"b": [[{"c": {}}]]}}))
    new = pb.NewRequest(agents=[pb.AgentDef(name="a", tools=[schema])], llm=LLM)
    code, details = code_of(lambda: stub.New(new, timeout=5))
    assert code is grpc.StatusCode.INVALID_ARGUMENT and "--max-struct-depth" in details


def test_requests_protobuf_cannot_decode_are_invalid_argument(limited: DaemonProcess) -> None:
    """Invalid UTF-8 in a string field and garbage bytes: INVALID_ARGUMENT, never UNKNOWN."""
    with grpc.insecure_channel(limited.target) as channel:
        snapshot = channel.unary_unary("/toolnexus.agents.v1.AgentRuntime/Snapshot")
        for raw, reason in ((b"\x0a\x02\xff\xfe", "not valid UTF-8"), (b"\xff\xff\xff", "malformed")):
            code, details = code_of(lambda raw=raw: snapshot(raw, timeout=5))
            assert code is grpc.StatusCode.INVALID_ARGUMENT and reason in details, details
    assert '"level": "error"' not in limited.logs()


def test_a_worker_reply_too_deep_fails_its_call_naming_the_limit(tmp_path: Path,
                                                                 model: ScriptedModelServer) -> None:
    """The call gets an error result the model sees; the worker stream stays up."""
    model.push(chat_response(tool_calls=[tool_call("t", {})]), chat_response("recovered"))
    with DaemonProcess(tmp_path / "data", "--max-struct-depth", "4") as proc:
        channel, stub = open_stub(proc.target)
        with channel:
            new = pb.NewRequest(agents=[native_agent("a", "t")], llm=openai_llm(model.url))
            rid = stub.New(new, timeout=5).runtime_id
            handle = stub.Spawn(pb.SpawnRequest(runtime_id=rid, agent="a"), timeout=5).handle
            worker = Worker(stub, rid, tool=lambda c: pb.ToolOutcome(call_id=c.call_id, output="ok",
                                                                     metadata=nested(6)))
            stub.Wake(pb.WakeRequest(runtime_id=rid, handle=handle, prompt="go"), timeout=5)
            result = stub.Wait(pb.WaitRequest(runtime_id=rid, handle=handle, timeout_ms=10_000), timeout=15)
            worker.close()
    assert (result.status, result.text) == ("done", "recovered")
    tool_message = model.requests[1]["messages"][-1]
    assert tool_message["role"] == "tool" and "--max-struct-depth" in tool_message["content"]


def test_undecodable_bytes_on_connect_end_the_stream_invalid_argument(stub: pb_grpc.AgentRuntimeStub,
                                                                      limited: DaemonProcess) -> None:
    rid, _ = _runtime(stub)
    hello = pb.WorkerMessage(hello=pb.WorkerHello(runtime_id=rid, worker_id="raw")).SerializeToString()
    sent = threading.Event()

    def messages() -> Iterator[bytes]:
        yield hello
        yield b"\x12\x03\xff\xff\xff"  # a tool_outcome whose bytes are not a ToolOutcome
        sent.wait(10)

    with grpc.insecure_channel(limited.target) as channel:
        stream = channel.stream_stream(CONNECT)(messages(), timeout=10)
        welcome = pb.DaemonMessage.FromString(next(stream))
        assert welcome.welcome.runtime_id == rid
        with pytest.raises(grpc.RpcError) as err:
            next(stream)
        sent.set()
    assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "WorkerMessage could not be decoded" in (err.value.details() or "")


def test_event_retention_defaults_to_the_flag_and_a_runtime_may_set_its_own(
        stub: pb_grpc.AgentRuntimeStub) -> None:
    default_rid, _ = _runtime(stub)
    own_rid, _ = _runtime(stub, event_retention=7)
    assert stub.Info(pb.InfoRequest(runtime_id=default_rid), timeout=5).limits["event_retention"] == 50
    assert stub.Info(pb.InfoRequest(runtime_id=own_rid), timeout=5).limits["event_retention"] == 7
