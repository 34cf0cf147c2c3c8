"""The commands that change things, against a real daemon: ``new``, ``spawn``, ``wake``, ``post``,
``interrupt``, ``close``, ``shutdown`` and ``resume``; and ``pending --older-than``, tables that fit
100 columns, ``--json`` everywhere."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.daemon import DaemonProcess
from tests.support.grpc_client import approval_agent, struct
from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_devtools import ScriptedModelServer

from .conftest import (
    FIXED_ID,
    FIXED_PATH,
    TOKEN,
    Daemon,
    authed,
    clean_env,
    run_cli,
    snapshot,
    suspend,
)


def _registry(model: ScriptedModelServer, **extra: Any) -> dict[str, Any]:
    """A NewRequest as JSON (the proto's JSON mapping): the approval agent on the scripted model."""
    tool = {"name": "approve", "description": "asks a human", "source": "webhook",
            "inputSchema": {"type": "object", "properties": {}}, "http": {"url": model.approval_url}}
    return {"agents": [{"name": "approver", "does": "needs approval", "soul": "You act after approval.",
                        "tools": [tool]}],
            "llm": {"style": "openai", "baseUrl": model.url, "model": "scripted", "timeoutMs": 5000}, **extra}


def _file(tmp_path: Path, value: Any, name: str = "registry.json") -> str:
    path = tmp_path / name
    path.write_text(value if isinstance(value, str) else json.dumps(value))
    return str(path)


def _ok(out: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert out.returncode == 0, (out.stdout, out.stderr)
    return out


def _with_stdin(d: Daemon, *args: str, stdin: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "toolnexus_daemon", *authed(d, *args)], input=stdin,
                          capture_output=True, text=True, env=clean_env(), timeout=60, check=False)


def test_new_creates_then_reattaches_and_spawn_wake_run_it(daemon: Daemon, model: ScriptedModelServer,
                                                          tmp_path: Path) -> None:
    path = _file(tmp_path, _registry(model))
    created = _ok(run_cli(*authed(daemon, "new", path, "--runtime-id", "cli-made")))
    assert created.stdout == "created runtime cli-made (root handle root)\n"
    again = json.loads(_ok(run_cli(*authed(daemon, "new", path, "--runtime-id", "cli-made",
                                           "--json"))).stdout)
    assert (again["runtime_id"], again["reattached"]) == ("cli-made", True)
    spawned = _ok(run_cli(*authed(daemon, "spawn", "cli-made", "approver"))).stdout
    assert spawned == "spawned root/approver.1\n"
    woke = _ok(run_cli(*authed(daemon, "wake", "cli-made", "root/approver.1", "do it", "--wait", "20")))
    lines = woke.stdout.splitlines()
    assert lines[0] == "woke root/approver.1"
    assert lines[1].startswith("root/approver.1: pending on approval approval-") and '"approve?"' in lines[1]
    both = json.loads(_ok(_with_stdin(daemon, "spawn", "cli-made", "approver", "--prompt", "-", "--wait",
                                      "20", "--json", stdin="do it too")).stdout)
    assert both["handle"] == "root/approver.2" and both["result"]["status"] == "pending"


def test_new_reads_one_agent_or_a_list_and_stdin(daemon: Daemon, model: ScriptedModelServer,
                                                 tmp_path: Path) -> None:
    """A whole NewRequest from stdin; a bare agent or a list of agents becomes ``agents`` — here with
    no model configured, so the daemon's own refusal (exit 1) names what the registry lacks."""
    registry = _registry(model)
    listed = _ok(_with_stdin(daemon, "new", "-", "--json", stdin=json.dumps(registry)))
    made = json.loads(listed.stdout)
    assert made["runtime_id"].startswith("rt-") and made["reattached"] is False
    one_agent = registry["agents"][0]
    agent_only = run_cli(*authed(daemon, "new", _file(tmp_path, one_agent, "agent.json")))
    as_list = run_cli(*authed(daemon, "new", _file(tmp_path, [one_agent], "agents.json")))
    for out in (agent_only, as_list):
        assert out.returncode == 1, out.stderr
        assert 'INVALID_ARGUMENT: invalid registry: 1) agent "approver"' in out.stderr
        assert "llm.model is empty" in out.stderr


def test_new_refuses_a_bad_file_before_sending(daemon: Daemon, tmp_path: Path) -> None:
    not_json = run_cli(*authed(daemon, "new", _file(tmp_path, "{oops")))
    unknown = run_cli(*authed(daemon, "new", _file(tmp_path, {"agents": [], "colour": "red"})))
    yaml = run_cli(*authed(daemon, "new", _file(tmp_path, "agents: []\n", "registry.yaml")))
    missing = run_cli(*authed(daemon, "new", str(tmp_path / "absent.json")))
    scalar = run_cli(*authed(daemon, "new", _file(tmp_path, "42")))
    codes = [o.returncode for o in (not_json, unknown, yaml, missing, scalar)]
    assert codes == [2, 2, 2, 2, 2], [o.stderr for o in (not_json, unknown, yaml, missing, scalar)]
    assert "is not valid JSON" in not_json.stderr and "colour" in unknown.stderr
    assert "yq -o json" in yaml.stderr and "No such file" in missing.stderr and "int" in scalar.stderr


def test_spawn_refusals_have_their_codes(daemon: Daemon, model: ScriptedModelServer) -> None:
    rid, _, _ = suspend(daemon, model)
    no_agent = run_cli(*authed(daemon, "spawn", rid, "nobody"))
    no_runtime = run_cli(*authed(daemon, "spawn", "no-such-runtime", "approver"))
    wait_alone = run_cli(*authed(daemon, "spawn", rid, "approver", "--wait", "5"))
    assert (no_agent.returncode, no_runtime.returncode, wait_alone.returncode) == (3, 3, 2)
    assert 'unknown agent "nobody"' in no_agent.stderr and "--wait needs --prompt" in wait_alone.stderr


def test_post_interrupt_and_close(daemon: Daemon, model: ScriptedModelServer) -> None:
    rid, handle, request_id = suspend(daemon, model)
    posted = _ok(run_cli(*authed(daemon, "post", rid, handle, "also check the logs", "--from", "ops")))
    assert posted.stdout.startswith(f"posted to {handle}: item 1 of at most ")
    piped = _with_stdin(daemon, "post", rid, handle, "-", "--json", stdin="from stdin")
    second = json.loads(_ok(piped).stdout)
    assert second["position"] == 2 and second["inbox_cap"] > 2
    interrupted = _ok(run_cli(*authed(daemon, "interrupt", rid, handle)))
    assert interrupted.stdout == f"interrupted {handle} (suspended): cancelled its request {request_id}\n"
    again = run_cli(*authed(daemon, "interrupt", rid, handle))
    assert again.returncode == 1 and "FAILED_PRECONDITION" in again.stderr
    closed = json.loads(_ok(run_cli(*authed(daemon, "close", rid, handle, "--json"))).stdout)
    assert closed == {"runtime_id": rid, "handle": handle}
    assert snapshot(daemon, rid, handle).state == "closed"
    missing = run_cli(*authed(daemon, "close", rid, "root/nobody.1"))
    assert missing.returncode == 3


def test_shutdown_a_runtime_and_purge_it_only_with_yes(daemon: Daemon, model: ScriptedModelServer) -> None:
    rid, handle, _ = suspend(daemon, model)
    shut = _ok(run_cli(*authed(daemon, "shutdown", rid)))
    assert shut.stdout == f"runtime {rid} shut down: every handle closed, its final state kept\n"
    assert snapshot(daemon, rid, handle).state == "closed"
    unconfirmed = run_cli(*authed(daemon, "shutdown", rid, "--purge"))
    assert unconfirmed.returncode == 2 and "--yes" in unconfirmed.stderr
    purged = json.loads(_ok(run_cli(*authed(daemon, "shutdown", rid, "--purge", "--yes", "--json"))).stdout)
    assert purged == {"runtime_id": rid, "purged": True, "daemon": False}
    assert run_cli(*authed(daemon, "inspect", rid)).returncode == 3
    neither = run_cli(*authed(daemon, "shutdown"))
    assert neither.returncode == 2


def test_shutdown_daemon_stops_it_when_the_operator_allows_it(daemon: Daemon, tmp_path: Path) -> None:
    refused = run_cli(*authed(daemon, "shutdown", "--daemon"))
    assert refused.returncode == 6 and "--allow-remote-shutdown" in refused.stderr
    proc = DaemonProcess(tmp_path / "data", "--allow-remote-shutdown").start()
    try:
        out = run_cli("shutdown", "--daemon", "--target", proc.target)
        assert out.returncode == 0, out.stderr
        assert out.stdout == f"the daemon at {proc.target} is stopping\n"
        assert proc.proc is not None and proc.proc.wait(timeout=30) == 0
    finally:
        proc.stop()


def test_resume_takes_data_from_a_file_or_stdin(daemon: Daemon, model: ScriptedModelServer,
                                                tmp_path: Path) -> None:
    rid, handle, request_id = suspend(daemon, model, fixed=True)
    assert request_id == FIXED_ID
    data = _file(tmp_path, {"choice": "from-file"}, "answer.json")
    out = _ok(run_cli(*authed(daemon, "resume", rid, request_id, "--approve", "--data-file", data)))
    assert out.stdout.splitlines() == [f"approved {request_id} in runtime {rid}", f'{handle}: done "chose"']
    calls = [r.json() or {} for r in model.received if r.path == FIXED_PATH]
    seen = [c["answer"] for c in calls if c.get("answer")]
    assert seen[-1]["data"] == {"choice": "from-file"}
    rid2, _, _ = suspend(daemon, model, fixed=True)
    piped = _with_stdin(daemon, "resume", rid2, FIXED_ID, "--approve", "--data-file", "-", "--json",
                        stdin='{"choice": "piped"}')
    assert json.loads(_ok(piped).stdout)["result"]["text"] == "chose"
    bad = _with_stdin(daemon, "resume", rid2, FIXED_ID, "--approve", "--data-file", "-", stdin="[1]")
    assert bad.returncode == 2 and "--data-file must be a JSON object" in bad.stderr


def test_an_upgrading_resume_after_the_definition_changed_needs_accept(
        daemon: Daemon, model: ScriptedModelServer) -> None:
    rid, handle, request_id = suspend(daemon, model)
    agent = approval_agent("approver", model.approval_url)
    agent.tools[0].input_schema.CopyFrom(struct({"type": "object", "properties": {"n": {"type": "number"}}}))
    llm = pb.LlmConfig(style="openai", base_url=model.url, model="scripted", timeout_ms=5000)
    daemon.stub.New(pb.NewRequest(runtime_id=rid, agents=[agent], llm=llm), metadata=daemon.md, timeout=10)
    refused = run_cli(*authed(daemon, "resume", rid, request_id, "--approve", "--upgrade"))
    assert refused.returncode == 1 and 'tool "approve" changed since request' in refused.stderr
    accepted = _ok(run_cli(*authed(daemon, "resume", rid, request_id, "--approve",
                                   "--accept-changed-definition")))
    assert accepted.stdout.startswith(f"approved {request_id}")
    assert snapshot(daemon, rid, handle).state == "idle"


def test_pending_older_than_and_a_table_that_fits_100_columns(daemon: Daemon,
                                                              model: ScriptedModelServer) -> None:
    rid, _, request_id = suspend(daemon, model)
    young = json.loads(_ok(run_cli(*authed(daemon, "pending", "--runtime", rid, "--older-than", "0s",
                                           "--json"))).stdout)
    old = json.loads(_ok(run_cli(*authed(daemon, "pending", "--runtime", rid, "--older-than", "1h30m",
                                         "--json"))).stdout)
    assert [i["request"]["id"] for i in young] == [request_id] and old == []
    bad = run_cli(*authed(daemon, "pending", "--older-than", "soon"))
    assert bad.returncode == 2 and "is not a duration" in bad.stderr
    model.route(FIXED_PATH, lambda r: {"output": "", "pending": {"id": FIXED_ID, "kind": "input",
                                                                  "prompt": "which one? " * 30}})
    suspend(daemon, model, fixed=True)
    for command in ("pending", "runtimes"):
        table = _ok(run_cli(*authed(daemon, command))).stdout
        assert max(len(line) for line in table.splitlines()) <= 100, table


@pytest.mark.parametrize("command", ["new", "spawn", "wake", "post", "interrupt", "close", "shutdown",
                                     "resume"])
def test_help_of_each_new_command_documents_its_exit_codes(command: str) -> None:
    out = run_cli(command, "--help")
    assert out.returncode == 0 and "exit codes:" in out.stdout and "--json" in out.stdout
    assert max(len(line) for line in out.stdout.splitlines()) <= 100


def test_the_token_from_the_environment_works_for_changes(daemon: Daemon, model: ScriptedModelServer) -> None:
    rid, handle, _ = suspend(daemon, model)
    env = clean_env(TOOLNEXUS_TARGET=daemon.target, TOOLNEXUS_TOKEN=TOKEN)
    out = run_cli("post", rid, handle, "hi", env=env)
    assert out.returncode == 0, out.stderr
