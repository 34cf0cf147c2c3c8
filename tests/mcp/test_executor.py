"""The MCP executor in-process against a real server: an open call let go after its hold time is
made again when the answer comes, and the server's same question is answered from the record."""

from __future__ import annotations

import asyncio

import pytest

from toolnexus_daemon.model import Answer, McpServer, McpTarget, ToolDef, ToolSource
from toolnexus_daemon.tools import mcp as mcp_mod
from toolnexus_daemon.tools import mcp_session
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


def _connections_to(port: int) -> int:
    """TCP sockets of this machine whose remote end is ``port`` (any state, so a connection closed
    after one request still counts while it lingers in TIME_WAIT)."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as rows:
            next(rows)
            for row in rows:
                remote = row.split()[2]
                if int(remote.rsplit(":", 1)[1], 16) == port:
                    count += 1
    return count


async def test_calls_on_a_session_reuse_its_connections(mcp_server: McpServerProcess) -> None:
    # the example server answers each call with an SSE stream, which the SDK closes as soon as it
    # has the result: unless the rest is read, every call costs a new TCP connection
    target = McpTarget(McpServer("example", mcp_server.url), "add")
    tool = ToolDef("example__add", source=ToolSource.MCP, mcp=target)
    executor = McpExecutor()
    try:
        for i in range(30):
            inv = ToolInvocation("rt", "root/a.1", f"rt/root/a.1/s{i}c0", tool, {"a": i, "b": 1})
            done = await executor.invoke(inv)
            assert done.output == str(i + 1)
        # the session's GET stream, its POST connection, and the handshake's at most
        assert _connections_to(mcp_server.port) <= 4
    finally:
        await executor.aclose()


async def test_a_full_pool_makes_a_call_wait_for_a_session_given_back(
    mcp_server: McpServerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mcp_session, "MAX_SESSIONS_PER_SERVER", 1)

    def add(i: int, timeout_ms: int = 5000) -> ToolInvocation:
        server = McpServer("example", mcp_server.url, timeout_ms=timeout_ms)
        tool = ToolDef("example__add", source=ToolSource.MCP, mcp=McpTarget(server, "add"))
        return ToolInvocation("rt", "root/a.1", f"rt/root/a.1/s{i}c0", tool, {"a": i, "b": 1})

    executor = McpExecutor()
    try:
        # two calls at once on one session: the second waits for the first to give it back
        done = await asyncio.gather(executor.invoke(add(1)), executor.invoke(add(2)))
        assert [d.output for d in done] == ["2", "3"]
        [pool] = executor.sessions._pools.values()
        assert pool.count == 1 and len(pool.idle) == 1
        # the one session held by an open call: a call that cannot wait longer gives up, counted out
        asked = await executor.invoke(_paint(mcp_server.url))
        assert asked.pending is not None
        late = await executor.invoke(add(3, timeout_ms=200))
        assert late.is_error and "no session within the timeout" in late.output
        assert not pool.waiting
        waiting = asyncio.create_task(executor.invoke(add(4)))
        await asyncio.sleep(0.1)
        assert not waiting.done() and len(pool.waiting) == 1
        answered = await executor.invoke(_paint(mcp_server.url, Answer(asked.pending.id, False)))
        assert answered.output == "not painted: the user chose decline"
        async with asyncio.timeout(5):
            assert (await waiting).output == "5"  # woken by the session given back
        assert pool.count == 1 and not pool.waiting
    finally:
        await executor.aclose()
