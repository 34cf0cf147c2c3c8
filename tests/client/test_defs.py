"""Declaring tools, agents and registries (``_defs``)."""

from __future__ import annotations

import pytest

from toolnexus_client import Llm, Tool, ToolResult, agent, registry


def echo(args: dict[str, object], ctx: object) -> str:
    return str(args)


def test_native_tools_are_those_with_an_execute() -> None:
    """Only native tools with a callable are served; webhook and callable-less tools are not."""
    reg = registry(agent("a", uses={"tools": [Tool("echo", execute=echo), Tool("elsewhere"),
                                              Tool.webhook("hook", "http://127.0.0.1:1/")]}),
                   agent("b", uses={"tools": [Tool("echo", execute=echo)]}))
    assert sorted(reg.native_tools()) == ["echo"]
    assert reg.names() == ["a", "b"]


def test_registry_rejects_duplicates() -> None:
    """Two agents with one name, or one tool name bound to two callables, fail at declaration."""
    with pytest.raises(ValueError, match="declared twice"):
        registry(agent("a"), agent("a"))
    with pytest.raises(ValueError, match="two different execute"):
        registry(agent("a", uses={"tools": [Tool("t", execute=echo)]}),
                 agent("b", uses={"tools": [Tool("t", execute=lambda a, c: "")]}))


def test_tool_validation() -> None:
    """A nameless tool, an unknown source, or a webhook with a callable are refused."""
    with pytest.raises(ValueError, match="needs a name"):
        Tool("")
    with pytest.raises(ValueError, match="source must be"):
        Tool("t", source="grpc")
    with pytest.raises(ValueError, match="needs a url"):
        Tool("t", source="webhook")


def test_agent_uses_and_team_merge() -> None:
    """Team names from uses and team= merge without duplicates, in order; other uses keys fail."""
    spec = agent("lead", uses={"team": ["b", "a"]}, team=["a", "c"])
    assert spec.team == ("b", "a", "c")
    with pytest.raises(ValueError, match="skills"):
        agent("x", uses={"skills": []})
    with pytest.raises(TypeError, match="Tool values"):
        agent("x", uses={"tools": ["not a tool"]})


def test_llm_and_tool_result_helpers() -> None:
    """Llm.of accepts a dict; ToolResult helpers set the right flags."""
    assert Llm.of({"style": "anthropic", "max_tokens": 10}) == Llm(style="anthropic", max_tokens=10)
    with pytest.raises(ValueError, match="base_ur"):
        Llm.of({"base_ur": "x"})
    assert ToolResult.ok("x") == ToolResult("x", False)
    assert ToolResult.error("x").is_error
    pending = ToolResult.suspend({"id": "r", "kind": "input", "prompt": "name?", "expiresAt": "t"}).pending
    assert pending is not None and (pending.id, pending.expires_at) == ("r", "t")


def test_a_tool_deadline_goes_into_the_tool_definition() -> None:
    from toolnexus_client._convert import tool_to_pb

    assert tool_to_pb(Tool("slow", deadline_ms=1500)).deadline_ms == 1500
    with pytest.raises(ValueError, match="deadline_ms must not be negative"):
        Tool("slow", deadline_ms=-1)


def test_on_crash_goes_into_the_tool_definition() -> None:
    """``on_crash="ask"`` reaches ``ToolDef.on_crash`` for every source; anything else fails here."""
    from toolnexus_client._convert import tool_to_pb

    assert tool_to_pb(Tool("charge", on_crash="ask")).on_crash == "ask"
    assert tool_to_pb(Tool.webhook("hook", "http://127.0.0.1:1/", on_crash="ask")).on_crash == "ask"
    assert tool_to_pb(Tool.http("rest", "http://127.0.0.1:1/", on_crash="ask")).on_crash == "ask"
    assert tool_to_pb(Tool("lookup")).on_crash == "rerun"
    with pytest.raises(ValueError, match="on_crash must be one of rerun, ask"):
        Tool("charge", on_crash="maybe")


def test_mcp_servers_go_into_the_agent_definition() -> None:
    """``mcp_servers`` (keyword or ``uses``), as McpServer, a mapping, or a bare name from --mcp-config."""
    from toolnexus_client import McpServer
    from toolnexus_client._convert import agent_to_pb

    paint = McpServer("paint", "http://127.0.0.1:8765/mcp",
                      headers={"Authorization": "Bearer ${PAINT_TOKEN}"}, tools=["paint"], timeout_ms=500,
                      on_crash="ask")
    spec = agent("painter", uses={"mcp_servers": [paint]},
                 mcp_servers=[{"name": "search", "url": "https://s.example/mcp"}, "files"])
    out = agent_to_pb(spec)
    assert [(s.name, s.url) for s in out.mcp_servers] == [
        ("paint", "http://127.0.0.1:8765/mcp"), ("search", "https://s.example/mcp"), ("files", "")]
    first = out.mcp_servers[0]
    assert (dict(first.headers), list(first.tools), first.timeout_ms, first.on_crash) == (
        {"Authorization": "Bearer ${PAINT_TOKEN}"}, ["paint"], 500, "ask")
    with pytest.raises(ValueError, match="named more than once"):
        agent("a", mcp_servers=["files", "files"])
    with pytest.raises(ValueError, match="on_crash must be one of"):
        McpServer("x", on_crash="maybe")
    with pytest.raises(ValueError, match="unknown mcp server key"):
        agent("a", mcp_servers=[{"name": "x", "command": "rm"}])
