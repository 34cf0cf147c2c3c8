"""A real daemon serving MCP (``--mcp-listen``, ``--mcp-expose demo``) with a bearer token, the
scripted model server, and a real MCP client built with the SDK over streamable HTTP."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import httpx2
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tests.support.daemon import DaemonProcess
from tests.support.grpc_client import approval_agent, openai_llm
from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_daemon.api._gen import runtime_pb2_grpc as pb_grpc
from toolnexus_devtools import ScriptedModelServer

TOKEN = "mcp-test-token"
RUNTIME = "demo"


@dataclass
class McpDaemon:
    daemon: DaemonProcess
    stub: pb_grpc.AgentRuntimeStub
    channel: grpc.Channel

    @property
    def url(self) -> str:
        return f"http://{mcp_address(self.daemon)}/mcp"

    def grpc_metadata(self) -> list[tuple[str, str]]:
        return [("authorization", f"Bearer {TOKEN}")]


def mcp_address(daemon: DaemonProcess) -> str:
    for line in reversed(daemon.log_lines):
        with contextlib.suppress(ValueError):
            rec = json.loads(line)
            if isinstance(rec, dict) and rec.get("msg") == "serving MCP":
                return str(rec["mcp_address"])
    raise AssertionError("the daemon did not log its MCP address:\n" + daemon.logs())


def connect(daemon: DaemonProcess) -> tuple[grpc.Channel, pb_grpc.AgentRuntimeStub]:
    channel = grpc.insecure_channel(daemon.target)
    grpc.channel_ready_future(channel).result(timeout=10)
    return channel, pb_grpc.AgentRuntimeStub(channel)


@pytest.fixture
def model() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as server:
        yield server


@pytest.fixture
def served(tmp_path: Path, model: ScriptedModelServer) -> Iterator[McpDaemon]:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    daemon = DaemonProcess(tmp_path / "data", "--token-file", str(token_file), "--mcp-listen", "127.0.0.1:0",
                           "--mcp-expose", RUNTIME).start()
    try:
        channel, stub = connect(daemon)
        meta = [("authorization", f"Bearer {TOKEN}")]
        agents = [pb.AgentDef(name="writer", does="writes a line"),
                  approval_agent("approver", model.approval_url)]
        stub.New(pb.NewRequest(runtime_id=RUNTIME, agents=agents, llm=openai_llm(model.url)), timeout=10,
                 metadata=meta)
        yield McpDaemon(daemon, stub, channel)
        channel.close()
    finally:
        code = daemon.stop()
    # open MCP sessions and calls do not hold the daemon's exit hostage
    assert code == 0, daemon.logs()


@contextlib.asynccontextmanager
async def mcp_session(url: str, token: str | None = TOKEN, **kwargs: Any) -> AsyncIterator[ClientSession]:
    """An initialized MCP client session over streamable HTTP."""
    headers = {"Authorization": f"Bearer {token}"} if token else None
    async with create_mcp_http_client(headers=headers) as http, \
            streamable_http_client(url, http_client=http) as (read, write), \
            ClientSession(read, write, **kwargs) as session:
        await session.initialize()
        yield session


async def call_as_task(session: ClientSession, tool: str, prompt: str, ttl_ms: int = 60_000) -> Any:
    """A task-augmented ``tools/call``, as the specification defines it. The SDK's client (2.3.0)
    checks every ``tools/call`` reply against ``CallToolResult``, so it cannot take the
    ``CreateTaskResult`` the specification answers with: this sends the request through the
    session's own dispatcher and stamp (the same path ``send_request`` takes) and parses the reply
    with the SDK's ``CreateTaskResult``."""
    import mcp_types as types

    request = types.CallToolRequest(params=types.CallToolRequestParams(
        name=tool, arguments={"prompt": prompt}, task=types.TaskMetadata(ttl=ttl_ms)))
    data = request.model_dump(by_alias=True, mode="json", exclude_none=True)
    opts: dict[str, Any] = {"headers": {"Mcp-Name": tool}}
    session._stamp(data, opts)  # type: ignore[arg-type]  # the negotiated version's headers
    raw = await session._dispatcher.send_raw_request("tools/call", data["params"], opts)  # type: ignore[arg-type]
    return types.CreateTaskResult.model_validate(raw, by_name=False).task


async def post_status(url: str, headers: dict[str, str]) -> int:
    """The status of a POST to ``url`` with ``headers`` (the token check comes before any MCP)."""
    async with httpx2.AsyncClient() as http:
        accept = {"Accept": "application/json, text/event-stream"}
        reply = await http.post(url, json={}, headers={**headers, **accept})
        return reply.status_code
