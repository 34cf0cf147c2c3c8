"""The MCP executor in-process against a real server: an open call let go after its hold time is
made again when the answer comes, and the server's same question is answered from the record."""

from __future__ import annotations

import asyncio

import pytest

from toolnexus_daemon.model import Answer, McpServer, McpTarget, ToolDef, ToolSource
from toolnexus_daemon.tools import mcp as mcp_mod
from toolnexus_daemon.tools.base import ToolInvocation
from toolnexus_daemon.tools.mcp import McpExecutor

from .conftest import McpServerProcess


def _paint(url: str, answer: Answer | None = None) -> ToolInvocation:
    tool = ToolDef("example__paint", source=ToolSource.MCP, mcp=McpTarget(McpServer("example", url), "paint"))
    return ToolInvocation(
        "rt", "root/p.1", "rt/root/p.1/s1c0" + ("a1" if answer else ""), tool, {"wall": "west"}, answer
    )


async def test_a_call_held_too_long_is_made_again_with_the_answer(
    mcp_server: McpServerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mcp_mod, "HOLD_S", 0.2)
    executor = McpExecutor()
    try:
        asked = await executor.invoke(_paint(mcp_server.url))
        assert asked.pending is not None and asked.pending.kind == "input"
        await asyncio.sleep(0.6)  # the hold ends: the open call is let go, its session closed
        assert not executor._open
        done = await executor.invoke(
            _paint(mcp_server.url, Answer(asked.pending.id, True, {"color": "ochre"}))
        )
        assert done.output == "painted the west wall ochre (1 coat(s))"
        assert [d["color"] for d in mcp_server.completed()] == ["ochre"]
    finally:
        await executor.aclose()


async def test_the_oldest_held_call_is_let_go_past_the_limit(
    mcp_server: McpServerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mcp_mod, "MAX_HELD", 1)
    executor = McpExecutor()
    try:
        first = await executor.invoke(_paint(mcp_server.url))
        second_inv = ToolInvocation(
            "rt", "root/p.2", "rt/root/p.2/s1c0", _paint(mcp_server.url).tool, {"wall": "south"}
        )
        second = await executor.invoke(second_inv)
        assert first.pending is not None and second.pending is not None
        assert list(executor._open) == ["rt/root/p.2/s1c0"]
        done = await executor.invoke(_paint(mcp_server.url, Answer(first.pending.id, False)))
        assert done.output == "not painted: the user chose decline"
    finally:
        await executor.aclose()
