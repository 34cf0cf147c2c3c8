"""Random hostile replies from a model server and a webhook, against a live daemon.

Hypothesis builds chat-completion bodies and webhook ToolResult bodies of every wrong shape —
any JSON where text or objects belong, integers far past int64, nesting past what protobuf
parses, argument strings that are not JSON — and the scripted server sends them. Whatever the
reply, the turn settles (``done``, ``error``, or ``pending`` on a request that was valid), and
afterwards every read of the runtime answers: nothing a peer sends is stored in a way that
breaks a later read.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.conftest import CASES, examples
from tests.support.daemon import DaemonProcess
from tests.support.grpc_client import open_stub, openai_llm
from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_daemon.api._gen import runtime_pb2_grpc as pb_grpc
from toolnexus_devtools import Reply, ScriptedModelServer, chat_response, tool_call

RUNTIME = "fuzz-hostile-peers"
SETTLED = {"done", "error", "pending", "incomplete"}

_leaf = st.one_of(st.none(), st.booleans(), st.integers(-(2**80), 2**80),
                  st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=40))
json_values = st.recursive(_leaf, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=16)
nesting = st.integers(20, 400).map(lambda n: "[" * n + "]" * n)
deep_objects = st.integers(20, 150).map(lambda n: _nest(n))
huge_ints = st.one_of(st.integers(-(2**70), 2**70), st.sampled_from([10**20, -1, 2**63, 2**64]))


def _nest(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": 1}
    for _ in range(levels):
        value = {"d": value}
    return value


arguments = st.one_of(st.text(max_size=40), nesting, json_values, st.just("{}"), st.just('{"q": 1}'))
functions = st.one_of(json_values, st.fixed_dictionaries(
    {"name": st.one_of(st.sampled_from(["hook", "", "nope"]), json_values), "arguments": arguments}))
tool_calls = st.one_of(json_values, st.lists(st.one_of(json_values, st.fixed_dictionaries(
    {"id": st.one_of(st.text(max_size=8), json_values), "type": st.just("function"), "function": functions})),
    max_size=3))
messages = st.fixed_dictionaries({"role": st.just("assistant")}, optional={
    "content": st.one_of(json_values, st.text(max_size=200), deep_objects), "tool_calls": tool_calls})
usages = st.one_of(json_values, st.fixed_dictionaries(
    {"prompt_tokens": huge_ints, "completion_tokens": huge_ints, "total_tokens": huge_ints}))
model_replies = st.builds(lambda message, usage: {
    "id": "c", "object": "chat.completion", "created": 0, "model": "m",
    "choices": [{"index": 0, "message": message, "finish_reason": "stop"}], "usage": usage},
    messages, usages)

requests = st.fixed_dictionaries({}, optional={
    "id": st.one_of(st.text(max_size=20), json_values, st.just("x" * 300)),
    "kind": st.one_of(st.sampled_from(["approval", "input"]), json_values),
    "prompt": st.one_of(st.text(max_size=40), json_values),
    "url": st.one_of(st.just("https://example.invalid/a"), json_values),
    "expires_at": st.one_of(st.just("2999-01-01T00:00:00Z"), json_values),
    "data": st.one_of(json_values, deep_objects)})
webhook_replies = st.one_of(json_values, st.fixed_dictionaries({}, optional={
    "output": st.one_of(st.text(max_size=100), json_values), "is_error": json_values,
    "metadata": st.one_of(json_values, deep_objects), "pending": st.one_of(requests, json_values)}))


class Peers:
    """A runtime whose agent calls the webhook tool ``hook`` on the scripted server."""

    def __init__(self, stub: pb_grpc.AgentRuntimeStub, model: ScriptedModelServer) -> None:
        self.stub, self.model = stub, model
        hook = pb.ToolDef(name="hook", source="webhook", http=pb.HttpConfig(url=model.origin + "/hook"))
        agent = pb.AgentDef(name="peer", does="talks to hostile peers", tools=[hook])
        stub.New(pb.NewRequest(runtime_id=RUNTIME, agents=[agent], llm=openai_llm(model.url)), timeout=5)
        self.handle = stub.Spawn(pb.SpawnRequest(runtime_id=RUNTIME, agent="peer"), timeout=5).handle

    def turn(self) -> pb.TaskResult:
        self.stub.Wake(pb.WakeRequest(runtime_id=RUNTIME, handle=self.handle, prompt="go"), timeout=5)
        wait = pb.WaitRequest(runtime_id=RUNTIME, handle=self.handle, timeout_ms=10_000)
        result = self.stub.Wait(wait, timeout=15)
        if result.status == "pending":  # a valid suspension: cancel it for the next case
            self.stub.Interrupt(pb.InterruptRequest(runtime_id=RUNTIME, handle=self.handle), timeout=5)
        return result

    def assert_readable(self) -> None:
        for handle in ("root", self.handle):
            self.stub.Snapshot(pb.SnapshotRequest(runtime_id=RUNTIME, handle=handle), timeout=5)
        self.stub.List(pb.ListRequest(runtime_id=RUNTIME), timeout=5)
        try:
            for _ in self.stub.Watch(pb.WatchRequest(runtime_id=RUNTIME, types=["result"]), timeout=0.3):
                pass
        except grpc.RpcError as err:
            assert err.code() is grpc.StatusCode.DEADLINE_EXCEEDED, err


@pytest.fixture(scope="module")
def peers(daemon: DaemonProcess) -> Iterator[Peers]:
    with ScriptedModelServer() as model:
        channel, stub = open_stub(daemon.target)
        with channel:
            yield Peers(stub, model)


def echo_after_hook(body: dict[str, Any]) -> dict[str, Any]:
    tools = [m for m in body.get("messages") or [] if m.get("role") == "tool"]
    if tools:
        return chat_response(content=str(tools[0].get("content"))[:200], usage=(1, 1, 2))
    return chat_response(content="", tool_calls=[tool_call("hook", {})], usage=(1, 1, 2))


@given(reply=model_replies)
@examples(ci=25)
def test_hostile_model_replies_settle_the_turn_and_keep_the_runtime_readable(
        peers: Peers, reply: dict[str, Any]) -> None:
    CASES["hostile model reply"] += 1
    peers.model.script = echo_after_hook
    peers.model.route("/hook", lambda req: Reply(body={"output": "hooked"}))
    peers.model.push(reply)
    assert peers.turn().status in SETTLED
    peers.assert_readable()


@given(reply=webhook_replies)
@examples(ci=25)
def test_hostile_webhook_replies_settle_the_turn_and_keep_the_runtime_readable(
        peers: Peers, reply: Any) -> None:
    CASES["hostile webhook reply"] += 1
    peers.model.script = echo_after_hook
    peers.model.route("/hook", lambda req: Reply(body=reply))
    assert peers.turn().status in SETTLED
    peers.assert_readable()
