"""Hostile model servers and webhooks against a live daemon (issue 13 items 2 and 12).

Each case scripts the model server with a drawn reply and the webhook with a drawn answer, runs one
turn and checks: the turn settles (never hangs), never as an internal error, a tool never runs on
arguments that are not a JSON object, and every read of the runtime still answers afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from hypothesis import given

from tests.fuzz.conftest import CASES, examples
from tests.fuzz.peer_strategies import TOOL, model_replies, webhook_replies
from tests.support.grpc_client import openai_llm
from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_daemon.api._gen import runtime_pb2_grpc as pb_grpc
from toolnexus_daemon.devtools import Reply, ScriptedModelServer, chat_response
from toolnexus_daemon.model import JSON

RUNTIME = "fuzz-peers"
SETTLED = {"done", "error", "pending", "incomplete"}


class Peers:
    def __init__(self, stub: pb_grpc.AgentRuntimeStub, server: ScriptedModelServer) -> None:
        self.stub, self.server = stub, server
        hook = pb.ToolDef(name=TOOL, source="webhook", http=pb.HttpConfig(url=server.origin + "/hook"))
        agent = pb.AgentDef(name="worker", does="works", tools=[hook])
        stub.New(pb.NewRequest(runtime_id=RUNTIME, agents=[agent], llm=openai_llm(server.url)), timeout=10)
        self.handle = stub.Spawn(pb.SpawnRequest(runtime_id=RUNTIME, agent="worker"), timeout=10).handle

    def hook_calls(self) -> int:
        return len([r for r in self.server.received if r.path == "/hook"])

    def turn(self) -> pb.TaskResult:
        self.stub.Wake(pb.WakeRequest(runtime_id=RUNTIME, handle=self.handle, prompt="go"), timeout=10)
        return self.stub.Wait(pb.WaitRequest(runtime_id=RUNTIME, handle=self.handle, timeout_ms=20_000),
                              timeout=30)

    def assert_readable(self) -> None:
        for handle in ("root", self.handle):
            self.stub.Snapshot(pb.SnapshotRequest(runtime_id=RUNTIME, handle=handle), timeout=10)
        self.stub.List(pb.ListRequest(runtime_id=RUNTIME), timeout=10)


@pytest.fixture(scope="module")
def peers(stub: pb_grpc.AgentRuntimeStub) -> Iterator[Peers]:
    with ScriptedModelServer() as server:
        yield Peers(stub, server)


def _script(reply: Any) -> Any:
    def script(body: JSON) -> Any:
        if any(m.get("role") == "tool" for m in body.get("messages") or []):
            return chat_response(content="read it", usage=(1, 1, 2))
        return Reply(body=reply)
    return script


@examples(25)
@given(drawn=model_replies(), hook=webhook_replies)
def test_hostile_model_and_webhook_replies(peers: Peers, drawn: tuple[Any, bool], hook: Any) -> None:
    CASES["model+webhook replies"] += 1
    reply, may_run = drawn
    peers.server.script = _script(reply)
    peers.server.route("/hook", lambda req: Reply(body=hook))
    before = peers.hook_calls()
    result = peers.turn()
    assert result.status in SETTLED, result
    assert "internal error" not in result.text, result.text[:500]
    if not may_run:
        assert peers.hook_calls() == before, "the tool ran on arguments that are not a JSON object, or on a reply that is not a list of calls"
    if result.status == "pending":
        peers.stub.Interrupt(pb.InterruptRequest(runtime_id=RUNTIME, handle=peers.handle), timeout=10)
    try:
        peers.assert_readable()
    except grpc.RpcError as err:  # pragma: no cover - the failure message is the point
        pytest.fail(f"a read failed after a hostile reply: {err.code()} {err.details()}")
