"""Helpers for the answer-link tests: a daemon serving links, a handle suspended with one."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tests.support.daemon import DaemonProcess
from tests.support.grpc_client import approval_agent, openai_llm, struct
from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_daemon.api._gen import runtime_pb2_grpc as pb_grpc
from toolnexus_devtools import Received, Reply, ScriptedModelServer

ANSWERS_ARGS = ("--answers-listen", "127.0.0.1:0")
AUTH_PATH = "/tools/sign-in"


def answers_base(stub: pb_grpc.AgentRuntimeStub) -> str:
    """What the daemon's links start with (Info.config shows it once the listener is bound)."""
    base = stub.Info(pb.InfoRequest(), timeout=5).config["answers-base-url"]
    assert base.startswith("http://127.0.0.1:"), base
    return base


def linked_daemon(data_dir: Path) -> DaemonProcess:
    return DaemonProcess(data_dir, *ANSWERS_ARGS)


@dataclass(frozen=True)
class Parked:
    runtime: str
    handle: str
    pending: pb.Request


def park(stub: pb_grpc.AgentRuntimeStub, model: ScriptedModelServer, *, tool_link: bool = True,
         agent: pb.AgentDef | None = None, options: pb.RuntimeOptions | None = None) -> Parked:
    """A runtime with one handle suspended on the approval webhook, its tool asking for a link."""
    if agent is None:
        agent = approval_agent("approver", model.approval_url)
        agent.tools[0].answer_link = tool_link
    new = pb.NewRequest(agents=[agent], llm=openai_llm(model.url), options=options)
    rid = stub.New(new, timeout=5).runtime_id
    handle = stub.Spawn(pb.SpawnRequest(runtime_id=rid, agent=agent.name), timeout=5).handle
    stub.Wake(pb.WakeRequest(runtime_id=rid, handle=handle, prompt="do the thing"), timeout=5)
    result = stub.Wait(pb.WaitRequest(runtime_id=rid, handle=handle, timeout_ms=10_000), timeout=15)
    assert result.status == "pending", result
    return Parked(rid, handle, result.pending)


def sign_in_agent(model: ScriptedModelServer, seen: list[dict[str, object]]) -> pb.AgentDef:
    """An agent whose tool suspends on an ``authorization`` request until it gets the OAuth code."""

    def hook(req: Received) -> Reply:
        call = req.json() or {}
        seen.append(call)
        answer = call.get("answer")
        if isinstance(answer, dict) and answer.get("ok"):
            return Reply(body={"output": f"signed in with {answer.get('data', {}).get('code')}"})
        return Reply(body={"output": "", "pending": {"id": "sign-in", "kind": "authorization",
                                                      "prompt": "sign in to the calendar",
                                                      "url": "https://provider.example/authorize"}})

    model.route(AUTH_PATH, hook)
    tool = pb.ToolDef(name="sign_in", description="signs in", source="webhook",
                      input_schema=struct({"type": "object", "properties": {}}),
                      http=pb.HttpConfig(url=model.origin + AUTH_PATH), answer_link=True)
    return pb.AgentDef(name="signer", does="signs in", soul="You sign in.", tools=[tool])


def token_of(url: str) -> str:
    return url.rsplit("/a/", 1)[1]
