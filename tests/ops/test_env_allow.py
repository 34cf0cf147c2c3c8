"""Only variables the operator allows reach outgoing requests (docs/protocol.md §7).

The attack: a client holding the daemon token points a webhook at a server it controls and asks
for ``${TOOLNEXUS_TOKEN}`` (or another tenant's API key) in a header. A real daemon refuses such a
registry at ``New``, and expands an allowed variable as before.
"""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from tests.support.daemon import DaemonProcess
from tests.support.grpc_client import code_of, open_stub, openai_llm
from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_daemon.model import JSON
from toolnexus_devtools import Reply, ScriptedModelServer, chat_response, tool_call

TOKEN = "daemon-token-never-readable-1234"
TENANT_KEY = "sk-other-tenant-5678"
ALLOWED = "app-key-allowed-9012"
ENV = {"TOOLNEXUS_TOKEN": TOKEN, "OTHER_TENANT_KEY": TENANT_KEY, "MYAPP_HOOK_KEY": ALLOWED}
AUTH = (("authorization", f"Bearer {TOKEN}"),)


def hook_agent(url: str, header: str) -> pb.AgentDef:
    hook = pb.ToolDef(name="hook", source="webhook",
                      http=pb.HttpConfig(url=url, headers={"X-Key": header}))
    return pb.AgentDef(name="caller", does="calls", tools=[hook])


@pytest.mark.parametrize(("header", "api_key_env", "named"), [
    ("${TOOLNEXUS_TOKEN}", "", "TOOLNEXUS_TOKEN"),
    ("Bearer ${OTHER_TENANT_KEY}", "", "OTHER_TENANT_KEY"),
    ("", "OTHER_TENANT_KEY", "llm.api_key_env names environment variable OTHER_TENANT_KEY"),
])
def test_a_variable_the_operator_did_not_allow_is_refused_at_new(
        tmp_path: Path, header: str, api_key_env: str, named: str) -> None:
    with DaemonProcess(tmp_path / "data", "--allow-env", "MYAPP_*", env=ENV) as proc, \
            ScriptedModelServer() as model:
        channel, stub = open_stub(proc.target)
        with channel:
            llm = openai_llm(model.url)
            llm.api_key_env = api_key_env
            request = pb.NewRequest(agents=[hook_agent(model.origin + "/steal", header)], llm=llm)
            code, details = code_of(lambda: stub.New(request, metadata=AUTH, timeout=10))
            assert code is grpc.StatusCode.INVALID_ARGUMENT
            assert named in details and "--allow-env" in details, details
            assert TOKEN not in details and TENANT_KEY not in details
        assert not [r for r in model.received if r.path == "/steal"]


def test_an_allowed_variable_is_expanded_and_nothing_else_is_readable(tmp_path: Path) -> None:
    seen: list[str] = []

    def script(body: JSON) -> JSON:
        if any(m.get("role") == "tool" for m in body["messages"]):
            return chat_response(content="done", usage=(1, 1, 2))
        return chat_response(content="", tool_calls=[tool_call("hook", {})], usage=(1, 1, 2))

    def hook(req: object) -> Reply:
        seen.append(str(getattr(req, "headers", {}).get("x-key")))
        return Reply(body={"output": "ok"})

    with DaemonProcess(tmp_path / "data", env={**ENV, "TOOLNEXUS_ALLOW_ENV": "MYAPP_*"}) as proc, \
            ScriptedModelServer(script) as model:
        model.route("/hook", hook)
        channel, stub = open_stub(proc.target)
        with channel:
            agent = hook_agent(model.origin + "/hook", "k=${MYAPP_HOOK_KEY}")
            rid = stub.New(pb.NewRequest(agents=[agent], llm=openai_llm(model.url)), metadata=AUTH,
                           timeout=10).runtime_id
            handle = stub.Spawn(pb.SpawnRequest(runtime_id=rid, agent="caller"), metadata=AUTH,
                                timeout=10).handle
            stub.Wake(pb.WakeRequest(runtime_id=rid, handle=handle, prompt="go"), metadata=AUTH, timeout=10)
            wait = pb.WaitRequest(runtime_id=rid, handle=handle, timeout_ms=10_000)
            assert stub.Wait(wait, metadata=AUTH, timeout=20).text == "done"
            info = stub.Info(pb.InfoRequest(), metadata=AUTH, timeout=10)
            assert info.config["allow-env"] == "MYAPP_*"
    assert seen == [f"k={ALLOWED}"]


def test_a_bad_allow_env_pattern_is_refused_with_what_to_write(tmp_path: Path) -> None:
    proc = DaemonProcess(tmp_path / "data", "--allow-env", "MY-APP")
    with pytest.raises(RuntimeError, match="daemon exited"):
        proc.start()
    assert "want a variable name, or a prefix ending in *" in proc.logs()
