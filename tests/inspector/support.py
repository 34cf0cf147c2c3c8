"""Helpers for the inspector's tests: a daemon serving the inspector, a client logged in to it."""

from __future__ import annotations

import html as html_mod
import itertools
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.support.daemon import DaemonProcess
from tests.support.grpc_client import open_stub, openai_llm, struct
from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_daemon.api._gen import runtime_pb2_grpc as pb_grpc
from toolnexus_devtools import Received, Reply, ScriptedModelServer

JSON = dict[str, Any]

TOKEN = "inspector-test-token-0123456789"


def inspector_daemon(tmp_path: Path, *, token: str | None = TOKEN,
                     extra: tuple[str, ...] = ()) -> DaemonProcess:
    args: list[str] = ["--ui-listen", "127.0.0.1:0", *extra]
    if token is not None:
        token_file = tmp_path / "token"
        token_file.write_text(token)
        args += ["--token-file", str(token_file)]
    return DaemonProcess(tmp_path / "data", *args)


def ui_base(target: str, token: str | None = TOKEN) -> str:
    """The inspector's address, as Info.config shows it once bound."""
    channel, stub = open_stub(target)
    try:
        metadata = [("authorization", f"Bearer {token}")] if token else []
        bound = stub.Info(pb.InfoRequest(), metadata=metadata, timeout=5).config["ui-listen"]
    finally:
        channel.close()
    assert bound.startswith("127.0.0.1:"), bound
    return f"http://{bound}"


@contextmanager
def login(base: str, token: str = TOKEN) -> Iterator[httpx.Client]:
    """A client holding a session cookie (and sending the inspector's Origin on every request)."""
    with httpx.Client(base_url=base, headers={"Origin": base}, timeout=10) as client:
        reply = client.post("/login", data={"token": token})
        assert reply.status_code == 303, reply.text
        yield client


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, html[:2000]
    return found.group(1)


@dataclass(frozen=True)
class Parked:
    runtime: str
    handle: str
    request: str


_paths = itertools.count(1)


def ask_agent(model: ScriptedModelServer, *, prompt: str, output: str, data: JSON | None = None,
              seen: list[JSON] | None = None) -> pb.AgentDef:
    """An agent whose one webhook tool suspends on a request (``prompt``, ``data``) until approved,
    then returns ``output`` (which the scripted model answers with: the agent's reply)."""
    n = next(_paths)
    path = f"/tools/ask-{n}"

    def hook(req: Received) -> Reply:
        call = req.json() or {}
        answer = call.get("answer")
        if seen is not None and answer is not None:
            seen.append(answer)
        if isinstance(answer, dict) and answer.get("ok"):
            return Reply(body={"output": output})
        if isinstance(answer, dict):
            return Reply(body={"output": f"declined: {answer.get('reason') or ''}"})
        pending: JSON = {"id": f"ask-{n}", "kind": "approval", "prompt": prompt}
        if data is not None:
            pending["data"] = data
        return Reply(body={"output": "", "pending": pending})

    model.route(path, hook)
    tool = pb.ToolDef(name="ask", description="asks a person", source="webhook",
                      input_schema=struct({"type": "object", "properties": {}}),
                      http=pb.HttpConfig(url=model.origin + path))
    return pb.AgentDef(name="asker", does="asks first", soul="You ask first.", tools=[tool])


def park(stub: pb_grpc.AgentRuntimeStub, model: ScriptedModelServer, agent: pb.AgentDef, *,
         key: str = "", token: str | None = TOKEN, stream: bool = True) -> Parked:
    """A runtime (protected by ``key`` when given) with one handle suspended on ``agent``'s tool;
    its model replies stream (``text`` events) unless ``stream`` is False."""
    md = [("authorization", f"Bearer {token}")] if token else []
    if key:
        md.append(("x-toolnexus-runtime-key", key))
    llm = openai_llm(model.url)
    llm.stream = stream
    new = pb.NewRequest(agents=[agent], llm=llm, runtime_key=key)
    rid = stub.New(new, metadata=md, timeout=5).runtime_id
    handle = stub.Spawn(pb.SpawnRequest(runtime_id=rid, agent=agent.name), metadata=md, timeout=5).handle
    stub.Wake(pb.WakeRequest(runtime_id=rid, handle=handle, prompt="do it"), metadata=md, timeout=5)
    wait = pb.WaitRequest(runtime_id=rid, handle=handle, timeout_ms=10_000)
    result = stub.Wait(wait, metadata=md, timeout=15)
    assert result.status == "pending", result
    return Parked(rid, handle, result.pending.id)


def wait_result(stub: pb_grpc.AgentRuntimeStub, parked: Parked, *, key: str = "",
                token: str | None = TOKEN) -> pb.TaskResult:
    md = [("authorization", f"Bearer {token}")] if token else []
    if key:
        md.append(("x-toolnexus-runtime-key", key))
    wait = pb.WaitRequest(runtime_id=parked.runtime, handle=parked.handle, timeout_ms=10_000)
    return stub.Wait(wait, metadata=md, timeout=15)


def answer_form(html: str, request_id: str) -> dict[str, str]:
    """The hidden fields of the answer form of ``request_id`` on a page."""
    start = html.index(f'data-request="{request_id}"')
    form = html[start:html.index("</form>", start)]
    found = re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', form)
    return {name: html_mod.unescape(value) for name, value in found}
