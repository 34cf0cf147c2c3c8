"""Fixtures for the commands for people: a real daemon (token-protected, on TCP and a unix socket),
the scripted model server, suspended runtimes made over gRPC, and the real command as a subprocess.

The command runs as ``python -m toolnexus_daemon COMMAND`` with an environment stripped of the
TOOLNEXUS_* variables of whoever runs the tests, so only what a test passes reaches it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.daemon import DaemonProcess
from tests.support.grpc_client import approval_agent, open_stub, openai_llm, struct
from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_daemon.api._gen import runtime_pb2_grpc as pb_grpc
from toolnexus_devtools import ScriptedModelServer

TOKEN = "people-cli-test-token"
FIXED_PATH = "/tools/fixed"
FIXED_ID = "fixed-request"


@dataclass
class Daemon:
    proc: DaemonProcess
    stub: pb_grpc.AgentRuntimeStub
    token_file: Path
    socket: str

    @property
    def target(self) -> str:
        return self.proc.target

    @property
    def md(self) -> tuple[tuple[str, str], ...]:
        return (("authorization", f"Bearer {TOKEN}"),)


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    base = tmp_path_factory.mktemp("people")
    token_file = base / "token"
    token_file.write_text(TOKEN + "\n")
    # unix socket paths are limited to ~100 bytes: pytest's tmp dirs can be longer
    sock_dir = Path(tempfile.mkdtemp(prefix="tnp-"))
    sock = f"unix:{sock_dir}/d.sock"
    proc = DaemonProcess(base / "data", "--token-file", str(token_file), listen=("127.0.0.1:0", sock),
                         env={"TOOLNEXUS_TOKEN": ""})
    proc.start()
    channel, stub = open_stub(proc.target)
    yield Daemon(proc, stub, token_file, sock)
    channel.close()
    proc.stop()
    for leftover in sock_dir.iterdir():
        leftover.unlink()
    sock_dir.rmdir()


@pytest.fixture
def model() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as srv:
        srv.route(FIXED_PATH, lambda r: {"output": "", "is_error": False,
                                         "pending": {"id": FIXED_ID, "kind": "input", "prompt": "which one?"}}
                  if not (r.json() or {}).get("answer") else {"output": "chose", "is_error": False})
        yield srv


def interruptible(*args: str) -> list[str]:
    """The argv of the CLI with SIGINT raising KeyboardInterrupt, as Ctrl-C at a terminal does,
    whatever the test runner inherited: a CI run started in the background of a non-interactive
    shell inherits SIGINT *ignored*, and Python then never raises it. (Not ``preexec_fn``: it
    can deadlock the child of a parent that runs threads.)"""
    boot = ("import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
            "sys.argv = ['toolnexus-daemon', *sys.argv[1:]]; "
            "runpy.run_module('toolnexus_daemon', run_name='__main__', alter_sys=True)")
    return [sys.executable, "-c", boot, *args]


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLNEXUS_")}
    return {**env, **extra}


def run_cli(*args: str, env: dict[str, str] | None = None,
            timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """The real command, as a person would type it."""
    return subprocess.run([sys.executable, "-m", "toolnexus_daemon", *args], capture_output=True, text=True,
                          env=env if env is not None else clean_env(), timeout=timeout, check=False)


def authed(d: Daemon, *args: str) -> list[str]:
    """``args`` followed by the target and token file of the test daemon."""
    return [*args, "--target", d.target, "--token-file", str(d.token_file)]


def suspend(d: Daemon, model: ScriptedModelServer, *, fixed: bool = False, key: str = "",
            runtime_id: str = "") -> tuple[str, str, str]:
    """A new runtime with one handle suspended: (runtime, handle, request id)."""
    agent = approval_agent("approver", model.approval_url)
    if fixed:
        agent.tools[0].http.url = model.origin + FIXED_PATH
        agent.tools[0].input_schema.CopyFrom(struct({"type": "object", "properties": {}}))
    md = d.md + (((("x-toolnexus-runtime-key", key),)) if key else ())
    new = pb.NewRequest(runtime_id=runtime_id, agents=[agent], llm=openai_llm(model.url), runtime_key=key)
    rid = d.stub.New(new, metadata=md, timeout=10).runtime_id
    handle = d.stub.Spawn(pb.SpawnRequest(runtime_id=rid, agent="approver"), metadata=md, timeout=10).handle
    d.stub.Wake(pb.WakeRequest(runtime_id=rid, handle=handle, prompt="do the thing"), metadata=md, timeout=10)
    result = d.stub.Wait(pb.WaitRequest(runtime_id=rid, handle=handle, timeout_ms=20_000), metadata=md,
                         timeout=30)
    assert result.status == "pending", result
    return rid, handle, result.pending.id


def snapshot(d: Daemon, rid: str, handle: str, key: str = "") -> pb.HandleSnapshot:
    md = d.md + (((("x-toolnexus-runtime-key", key),)) if key else ())
    return d.stub.Snapshot(pb.SnapshotRequest(runtime_id=rid, handle=handle), metadata=md, timeout=10)


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])

