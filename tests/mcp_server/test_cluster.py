"""Any daemon of a cluster serves the exposed agents and their tasks: two daemons on one real
PostgreSQL database, the runtime owned by the first, every MCP request sent to the second."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest

from tests.mcp_server.conftest import RUNTIME, call_as_task, connect, mcp_address, mcp_session
from tests.mcp_server.test_tasks import _get, _result, _until
from tests.support.daemon import DaemonProcess
from tests.support.grpc_client import approval_agent, openai_llm
from tests.support.pg_fixtures import pg_dsn, pg_server
from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_devtools import ScriptedModelServer

__all__ = ["pg_dsn", "pg_server"]


def _node(name: str, dsn: str, base: Path) -> DaemonProcess:
    return DaemonProcess(base / name, "--store", dsn, "--advertise", "127.0.0.1:0", "--node-id", name,
                         "--lease-ms", "1500", "--mcp-listen", "127.0.0.1:0", "--mcp-expose", RUNTIME)


@pytest.fixture
def pair(pg_dsn: str, tmp_path: Path, model: ScriptedModelServer) -> Iterator[tuple[DaemonProcess, str]]:
    """The owner (it creates the runtime) and the MCP URL of the other daemon."""
    owner, other = _node("a", pg_dsn, tmp_path).start(), None
    try:
        other = _node("b", pg_dsn, tmp_path).start()
        channel, stub = connect(owner)
        agents = [pb.AgentDef(name="writer", does="writes a line"),
                  approval_agent("approver", model.approval_url)]
        stub.New(pb.NewRequest(runtime_id=RUNTIME, agents=agents, llm=openai_llm(model.url)), timeout=10)
        channel.close()
        yield owner, f"http://{mcp_address(other)}/mcp"
    finally:
        if other is not None:
            other.stop()
        owner.stop()


async def test_a_daemon_that_does_not_own_the_runtime_serves_its_agents(
        pair: tuple[DaemonProcess, str]) -> None:
    owner, url = pair

    async def elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"approve": True})

    async with mcp_session(url, token=None, elicitation_callback=elicit) as session:
        assert {t.name for t in (await session.list_tools()).tools} == {"writer", "approver"}
        written = await session.call_tool("writer", {"prompt": "say ok"})
        approved = await session.call_tool("approver", {"prompt": "do the thing"})
    assert written.structured_content["text"] == "ok"
    assert approved.structured_content["text"] == "action performed"


async def test_a_task_is_answered_and_cancelled_through_any_daemon(pair: tuple[DaemonProcess, str]) -> None:
    owner, url = pair
    async with mcp_session(url, token=None) as session:
        task = await call_as_task(session, "approver", "do the thing")
        await _until(session, task.task_id, "input_required")
        listed = await session.send_request(types.ListTasksRequest(), types.ListTasksResult)
        assert task.task_id in [t.task_id for t in listed.tasks]
        other = await call_as_task(session, "writer", "say ok")
        await _until(session, other.task_id, "completed")
        assert (await _result(session, other.task_id)).structured_content["text"] == "ok"
        cancel = types.CancelTaskRequest(params=types.CancelTaskRequestParams(task_id=task.task_id))
        assert (await session.send_request(cancel, types.CancelTaskResult)).status == "cancelled"
    async with mcp_session(f"http://{mcp_address(owner)}/mcp", token=None) as session:
        assert (await _get(session, task.task_id)).status == "cancelled"
