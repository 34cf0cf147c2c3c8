"""Real MCP servers (examples/mcp_server.py, built with the official SDK) in subprocesses on
127.0.0.1, a scripted model that calls the tool a test names, and a daemon for each test."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from tests.support.daemon import DaemonProcess
from tests.support.grpc_client import open_stub, openai_llm, struct
from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_daemon.api._gen import runtime_pb2_grpc as pb_grpc
from toolnexus_devtools.model_server import chat_response, tool_call

ROOT = Path(__file__).resolve().parents[2]
SERVER = ROOT / "examples" / "mcp_server.py"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class McpServerProcess:
    """examples/mcp_server.py (or another ``script`` taking ``--port``) over streamable HTTP on a
    fixed free port (so a restart keeps its URL)."""

    def __init__(self, log: Path, script: Path = SERVER) -> None:
        self.port = free_port()
        self.log = log
        self.script = script
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def start(self) -> McpServerProcess:
        self.proc = subprocess.Popen(
            [sys.executable, str(self.script), "--port", str(self.port)],
            env={**_env(), "MCP_EXAMPLE_LOG": str(self.log)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("the MCP server did not start")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def completed(self) -> list[dict[str, Any]]:
        """What the server's tools really did (one JSON line per completed paint)."""
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines() if line]


def _env() -> dict[str, str]:
    import os

    return dict(os.environ)


@pytest.fixture
def mcp_server(tmp_path: Path) -> Iterator[McpServerProcess]:
    server = McpServerProcess(tmp_path / "done.jsonl").start()
    try:
        yield server
    finally:
        server.stop()


def calls(tool: str, arguments: dict[str, Any]) -> Any:
    """A model that calls ``tool`` once, then answers with what it returned."""

    def script(body: dict[str, Any]) -> dict[str, Any]:
        results = [m for m in body.get("messages") or [] if m.get("role") == "tool"]
        if results:
            return chat_response(content=str(results[-1].get("content") or ""), usage=(2, 1, 3))
        return chat_response(tool_calls=[tool_call(tool, arguments)], usage=(3, 2, 5))

    return script


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[DaemonProcess]:
    proc = DaemonProcess(tmp_path / "data").start()
    try:
        yield proc
    finally:
        proc.stop()


def mcp_agent(server: dict[str, Any], name: str = "painter") -> pb.AgentDef:
    return pb.AgentDef(name=name, does="uses MCP tools", mcp_servers=[pb.McpServer(**server)])


class Session:
    """One runtime on the daemon with the agent, driven over gRPC."""

    def __init__(self, target: str, model_url: str, agent: pb.AgentDef, runtime_id: str = "") -> None:
        self.channel, self.stub = open_stub(target)
        self.agent = agent
        self.model_url = model_url
        self.id = self.new(runtime_id).runtime_id

    @classmethod
    def attach(cls, target: str, model_url: str, agent: pb.AgentDef, runtime_id: str) -> Session:
        """A client of a runtime the daemon already has (loaded from its store), without New."""
        s = cls.__new__(cls)
        s.channel, s.stub = open_stub(target)
        s.agent, s.model_url, s.id = agent, model_url, runtime_id
        return s

    def new(self, runtime_id: str = "") -> pb.NewResponse:
        return self.stub.New(
            pb.NewRequest(
                runtime_id=runtime_id, agents=[self.agent], llm=openai_llm(self.model_url, timeout_ms=20000)
            )
        )

    def run(self, prompt: str = "go") -> tuple[str, pb.TaskResult]:
        handle = self.stub.Spawn(pb.SpawnRequest(runtime_id=self.id, agent=self.agent.name)).handle
        self.stub.Wake(pb.WakeRequest(runtime_id=self.id, handle=handle, prompt=prompt))
        return handle, self.stub.Wait(pb.WaitRequest(runtime_id=self.id, handle=handle, timeout_ms=30000))

    def resume(
        self, request_id: str, ok: bool = True, data: dict[str, Any] | None = None, reason: str = ""
    ) -> pb.ResumeResponse:
        answer = pb.Answer(id=request_id, ok=ok, reason=reason)
        if data is not None:
            answer.data.CopyFrom(struct(data))
        return self.stub.Resume(pb.ResumeRequest(runtime_id=self.id, answer=answer))

    def close(self) -> None:
        self.channel.close()


def stub_of(target: str) -> tuple[grpc.Channel, pb_grpc.AgentRuntimeStub]:
    return open_stub(target)
