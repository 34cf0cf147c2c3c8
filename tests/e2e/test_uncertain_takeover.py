"""A cluster takeover with a call of an ``on_crash: "ask"`` tool in flight (docs/protocol.md §9, §11).

Three daemons on one real PostgreSQL database (the fixtures of ``test_cluster``). The runtime's
owner is killed with SIGKILL while its webhook tool is running; the survivor that takes the
runtime over does not send the call again but suspends the handle on a ``reconcile`` request,
which is then answered through yet another daemon.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.test_cluster import LEASE_MS, Node, _retry, cluster, model
from tests.support.grpc_client import openai_llm, struct
from tests.support.pg_fixtures import pg_dsn, pg_server
from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_devtools import ScriptedModelServer
from toolnexus_devtools.model_server import Received, Reply, chat_response, tool_call

__all__ = ["cluster", "model", "pg_dsn", "pg_server"]


def _script(body: dict[str, Any]) -> dict[str, Any]:
    messages: list[Any] = body.get("messages") or []
    tools = [m for m in messages if isinstance(m, dict) and m.get("role") == "tool"]
    if tools:
        return chat_response(content=str(tools[-1].get("content")), usage=(2, 1, 3))
    return chat_response(tool_calls=[tool_call("charge", {"amount": 5})], usage=(3, 2, 5))


@pytest.fixture
def release() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()


def test_a_takeover_asks_about_an_ask_call_the_dead_owner_had_in_flight(
        cluster: dict[str, Node], model: ScriptedModelServer, release: threading.Event) -> None:
    a, b, c = cluster["a"], cluster["b"], cluster["c"]
    seen: list[str] = []

    def charge(req: Received) -> Reply:
        seen.append(str((req.json() or {}).get("call_id")))
        release.wait(30)
        return Reply(200, {"output": "charged late"})

    model.script = _script
    model.route("/charge", charge)
    tool = pb.ToolDef(name="charge", source="webhook", on_crash="ask",
                      http=pb.HttpConfig(url=model.origin + "/charge"))
    new = pb.NewRequest(agents=[pb.AgentDef(name="payer", tools=[tool])], llm=openai_llm(model.url))
    rid = a.stub.New(new, timeout=10).runtime_id
    handle = a.stub.Spawn(pb.SpawnRequest(runtime_id=rid, agent="payer"), timeout=10).handle
    a.stub.Wake(pb.WakeRequest(runtime_id=rid, handle=handle, prompt="charge"), timeout=10)
    deadline = time.monotonic() + 20
    while not seen:
        assert time.monotonic() < deadline, "the webhook was never called"
        time.sleep(0.05)
    a.proc.kill9()

    def wait() -> Any:
        return b.stub.Wait(pb.WaitRequest(runtime_id=rid, handle=handle, timeout_ms=15_000), timeout=20)

    result = _retry(wait, deadline_s=10 * LEASE_MS / 1000 + 20)
    assert result.status == "pending", result
    assert (result.pending.kind, result.pending.prompt) == ("reconcile", "did charge complete?")
    assert dict(result.pending.data)["call_id"] == seen[0]
    assert len(seen) == 1, "the survivor did not send the call again"
    answer = pb.Answer(id=result.pending.id, ok=True, data=struct({"output": "charged once"}))
    resumed = _retry(lambda: c.stub.Resume(pb.ResumeRequest(runtime_id=rid, answer=answer), timeout=20))
    assert (resumed.result.status, resumed.result.text) == ("done", "charged once")
    assert len(seen) == 1
