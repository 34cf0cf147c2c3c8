"""A server that answers with structured content its tool's output schema refuses has answered:
the call is over with an error the model reads (never "outcome unknown", even for an ``ask``
server), and the session stays in use for the next call. Against a real SDK server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from toolnexus_daemon.model import McpServer, McpTarget, OnCrash, ToolDef, ToolSource
from toolnexus_daemon.tools.base import ToolInvocation
from toolnexus_daemon.tools.mcp import McpExecutor

from .conftest import McpServerProcess

SERVER = Path(__file__).with_name("schema_server.py")


@pytest.fixture
def schema_server(tmp_path: Path) -> Iterator[str]:
    server = McpServerProcess(tmp_path / "unused.jsonl", script=SERVER).start()
    try:
        yield server.url
    finally:
        server.stop()


def _count(url: str, bad: bool, n: int) -> ToolInvocation:
    tool = ToolDef("s__count", source=ToolSource.MCP, mcp=McpTarget(McpServer("s", url), "count"),
                   on_crash=OnCrash.ASK)
    return ToolInvocation("rt", "root/c.1", f"rt/root/c.1/s{n}c0", tool, {"bad": bad}, None)


async def test_a_result_the_output_schema_refuses_is_an_error_of_that_call(schema_server: str) -> None:
    executor = McpExecutor()
    try:
        refused = await executor.invoke(_count(schema_server, True, 1))
        assert refused.is_error and refused.pending is None
        assert 'mcp server "s" tool "count" returned a result its output schema refuses' in refused.output
        assert "'many' is not of type 'integer'" in refused.output
        [pool] = executor.sessions._pools.values()
        [session] = pool.idle  # kept: the server answered
        good = await executor.invoke(_count(schema_server, False, 2))
        assert (good.is_error, good.output) == (False, "3\n\n{\"n\":3}")  # text and structured content
        assert pool.idle == [session] and pool.count == 1  # the same session carried on
    finally:
        await executor.aclose()
