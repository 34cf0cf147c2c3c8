"""kill -9 the daemon while a handle is suspended, then finish it from a NEW client process.

The test process suspends a handle, kills the daemon with SIGKILL and starts
a new one on the same data dir. A fresh Python process (this module run as
``python -m tests.e2e.test_crash_reattach``) reattaches with
``Runtime.new(runtime_id=...)``, serving the same tool (and, for llm style
``worker``, the model), and resumes. The handle must finish with the tool's
text, and its usage and turns continue from their values before the crash.
A second test keeps the same client across a kill -9 and a restart on the
same address: its worker stream reconnects by itself and serves the resume.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.daemon import DaemonProcess
from tests.support.grpc_client import open_stub
from toolnexus_client import Context, Runtime, Tool, ToolResult, agent, registry
from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_devtools import ScriptedModelServer, mock_model

ROOT = Path(__file__).resolve().parents[2]
AGENT = "operator"


def secret_action(args: dict[str, Any], ctx: Context) -> ToolResult | str:
    if ctx.answer is None:
        return ToolResult.suspend(id=f"secret-action:{ctx.handle}", kind="authorization", prompt="approve?")
    return "action performed"


def mock_transport(request: dict[str, Any]) -> dict[str, Any]:
    return {"status": 200, "headers": {}, "body": mock_model(request["body"])}


REGISTRY = registry(agent(AGENT, uses={"tools": [Tool("secret_action", execute=secret_action)]}))


def connect(target: str, style: str, base_url: str, runtime_id: str | None = None) -> Runtime:
    if style == "worker":
        return Runtime.new(target=target, registry=REGISTRY, transport=mock_transport, runtime_id=runtime_id)
    llm = {"style": "openai", "base_url": base_url, "model": "scripted"}
    return Runtime.new(target=target, registry=REGISTRY, llm=llm, runtime_id=runtime_id)


def child_main(target: str, style: str, base_url: str, runtime_id: str, handle: str, request_id: str) -> None:
    """The new client process: reattach, resume, print what the daemon then says as one JSON line."""
    rt = connect(target, style, base_url, runtime_id)
    try:
        resumed = rt.resume({"id": request_id, "ok": True})
        snap = rt.snapshot(handle)
        result = resumed.result
        print(json.dumps({
            "reattached": rt.reattached, "resumed_handle": resumed.handle,
            "resumed_text": result.text if result else None, "state": snap.state,
            "text": snap.last_result.text if snap.last_result else None,
            "usage_total": snap.usage_total, "turns_total": snap.turns_total}))
    finally:
        rt.detach()


@pytest.mark.parametrize("style", ["worker", "openai"])
def test_resume_after_kill9_from_a_new_process(style: str, daemon: DaemonProcess,
                                               model_server: ScriptedModelServer) -> None:
    """The suspended handle survives kill -9 and finishes from another process with continued counters."""
    rt = connect(daemon.target, style, model_server.url)
    handle = rt.spawn(rt.root, AGENT)
    rt.wake(handle, "please perform the secret action")
    result = rt.wait(handle, timeout=30)
    assert result.status == "pending" and result.pending is not None
    before = rt.snapshot(handle)
    assert (before.state, before.usage_total, before.turns_total) == ("suspended", 5, 1)

    daemon.kill9()
    rt.detach()  # the app dies too; its worker stream was reconnecting to a dead daemon
    daemon.start()

    child = subprocess.run(
        [sys.executable, "-m", "tests.e2e.test_crash_reattach", daemon.target, style, model_server.url,
         rt.id, handle, result.pending.id],
        cwd=ROOT, capture_output=True, text=True, timeout=90)
    assert child.returncode == 0, child.stderr + "\n--- daemon ---\n" + daemon.logs()
    report = json.loads(child.stdout.strip().splitlines()[-1])
    assert report["reattached"] is True
    assert (report["resumed_handle"], report["resumed_text"]) == (handle, "action performed")
    assert (report["state"], report["text"]) == ("idle", "action performed")
    assert report["usage_total"] == before.usage_total + 3
    assert report["turns_total"] == before.turns_total + 1


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_the_same_client_reconnects_after_kill9(tmp_path: Path) -> None:
    """A daemon restarted on the same address gets the client's worker back; the resume then finishes."""
    proc = DaemonProcess(tmp_path / "data", listen=(f"127.0.0.1:{free_port()}",)).start()
    try:
        with connect(proc.target, "worker", "") as rt:
            handle = rt.spawn(rt.root, AGENT)
            rt.wake(handle, "please perform the secret action")
            pending = rt.wait(handle, timeout=30).pending
            assert pending is not None and rt.worker is not None
            proc.kill9()
            proc.start()
            rt.worker.wait_welcomed(2, timeout=30)
            resumed = rt.resume({"id": pending.id, "ok": True})
            assert resumed.result is not None and resumed.result.text == "action performed"
            snap = rt.snapshot(handle)
            assert (snap.state, snap.usage_total, snap.turns_total) == ("idle", 8, 2)
    finally:
        proc.stop()


def test_a_fused_spawn_survives_kill9_once_acknowledged(daemon: DaemonProcess) -> None:
    """Spawn with a prompt is acknowledged only once the handle and its wake are durable (one commit):
    killed right after, the restarted daemon still has the handle, running from its wake's checkpoint,
    and a reattached worker finishes that turn."""
    with connect(daemon.target, "worker", "") as first:
        rid = first.id
    channel, stub = open_stub(daemon.target)  # no worker now: the woken turn waits for one
    try:
        fused = pb.SpawnRequest(runtime_id=rid, agent=AGENT, prompt="please perform the secret action")
        out = stub.Spawn(fused, timeout=10)
    finally:
        channel.close()
    assert (out.handle, out.queued, out.HasField("result")) == (f"root/{AGENT}.1", False, False)
    daemon.kill9()
    daemon.start()

    with connect(daemon.target, "worker", "", rid) as rt:
        assert rt.reattached
        result = rt.wait(out.handle, timeout=30)
        assert result.status == "pending" and result.pending is not None
        assert result.pending.id == f"secret-action:{out.handle}"
        kinds: list[tuple[str, str]] = []
        with rt.watch(handle=out.handle) as events:
            for event in events:  # replayed from the store
                kinds.append((event.type, event.to_state))
                if event.type == "pending":
                    break
        assert kinds[:2] == [("spawned", ""), ("transition", "running")]


if __name__ == "__main__":
    child_main(*sys.argv[1:7])
