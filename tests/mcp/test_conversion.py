"""MCP definitions, the operator's file, elicitation answers and results, without servers."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
from mcp_types import CallToolResult, EmbeddedResource, ImageContent, TextContent, TextResourceContents

from toolnexus_daemon import config_mcp
from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_daemon.api.convert_registry import registry_from
from toolnexus_daemon.engine import elicit_check
from toolnexus_daemon.engine.definitions.validate import env_problems, problems
from toolnexus_daemon.envexpand import EnvAllowList
from toolnexus_daemon.errors import InvalidArgument
from toolnexus_daemon.model import AgentDef, Answer, LlmConfig, McpServer, OnCrash, Request, RuntimeOptions
from toolnexus_daemon.tools.mcp import McpExecutor, offered_name
from toolnexus_daemon.tools.mcp_result import tool_result

LLM = pb.LlmConfig(base_url="http://127.0.0.1:1/v1", model="m")


def _agent(*servers: pb.McpServer) -> pb.NewRequest:
    return pb.NewRequest(agents=[pb.AgentDef(name="a", mcp_servers=list(servers))], llm=LLM)


def test_mcp_servers_convert_and_round_trip_through_the_store() -> None:
    reg = registry_from(
        _agent(
            pb.McpServer(
                name="files",
                url="https://f.example/mcp",
                headers={"X": "${T}"},
                tools=["read"],
                timeout_ms=500,
                on_crash="ask",
            )
        )
    )
    server = reg.agents[0].mcp_servers[0]
    assert server == McpServer("files", "https://f.example/mcp", {"X": "${T}"}, ("read",), 500, OnCrash.ASK)
    assert AgentDef.from_json(reg.agents[0].to_json()) == reg.agents[0]


def test_source_mcp_and_unknown_on_crash_are_refused() -> None:
    with pytest.raises(InvalidArgument) as err:
        registry_from(
            pb.NewRequest(
                agents=[
                    pb.AgentDef(
                        name="a",
                        tools=[pb.ToolDef(name="t", source="mcp")],
                        mcp_servers=[pb.McpServer(name="s", on_crash="maybe")],
                    )
                ],
                llm=LLM,
            )
        )
    assert 'tool "t" has unknown source "mcp"' in str(err.value)
    assert 'mcp server "s" has unknown on_crash "maybe"' in str(err.value)


@pytest.mark.parametrize(
    ("server", "expected"),
    [
        (McpServer("a" * 33, "http://h/mcp"), "must be 1-32 letters"),
        (McpServer("s", "file:///etc/passwd"), "url must be an http:// or https:// URL"),
        (McpServer("s", "http://h/" + "x" * 2100), "of at most 2048 characters"),
        (McpServer("s", "http://h/mcp", headers={"Bad Name": "v"}), 'header "Bad Name" must be a token'),
        (McpServer("s", "http://h/mcp", headers={"X": "a\r\nInjected: 1"}), "no line breaks"),
        (
            McpServer("s", "http://h/mcp", headers={f"H{i}": "v" for i in range(33)}),
            "33 headers; the limit is 32",
        ),
        (McpServer("s", "http://h/mcp", tools=("",)), 'tools names "", which is not 1-128 characters'),
        (McpServer("s", "http://h/mcp", timeout_ms=-1), "timeout_ms must not be negative"),
    ],
)
def test_mcp_server_bounds(server: McpServer, expected: str) -> None:
    found = problems([AgentDef("a", mcp_servers=(server,))], LlmConfig(model="m"), RuntimeOptions())
    assert any(expected in p for p in found), found


def test_a_server_named_twice_and_env_in_headers() -> None:
    agent = AgentDef(
        "a",
        mcp_servers=(
            McpServer("s", "http://h/mcp", headers={"A": "Bearer ${TOKEN}"}),
            McpServer("s", "http://h/mcp"),
        ),
    )
    assert any(
        'mcp server "s" is named more than once' in p
        for p in problems([agent], LlmConfig(model="m"), RuntimeOptions())
    )
    refused = env_problems([agent], LlmConfig(model="m"), EnvAllowList())
    assert refused == [
        'agent "a" mcp server "s" headers ${TOKEN} names environment variable TOKEN, which the '
        "daemon does not allow; the operator allows it with --allow-env TOKEN (or TOOLNEXUS_ALLOW_ENV)"
    ]
    assert env_problems([agent], LlmConfig(model="m"), EnvAllowList(("TOKEN",))) == []


def test_offered_names_fit_the_model_tool_name_rules() -> None:
    assert offered_name("files", "read.file v2") == "files__read_file_v2"
    assert len(offered_name("s" * 32, "t" * 100)) == 64


def test_the_operator_file_and_unknown_names(tmp_path: Path) -> None:
    cfg = config_mcp.parse(
        {
            "mcpServers": {
                "local": {"command": "python", "args": ["s.py"], "env": {"K": "v"}},
                "remote": {"url": "https://r.example/mcp", "headers": {"A": "b"}},
            }
        },
        "mcp.json",
    )
    assert cfg.servers["local"].stdio and not cfg.servers["remote"].stdio
    executor = McpExecutor(cfg)
    agents = [
        AgentDef("a", mcp_servers=(McpServer("local"), McpServer("other"), McpServer("u", "http://h/mcp")))
    ]
    assert executor.problems(agents) == [
        'agent "a": mcp server "other" has no url and is not in --mcp-config mcp.json; give its url, or have '
        "the operator add it to the --mcp-config file"
    ]
    for bad, expected in [
        ({}, '"mcpServers" object'),
        ({"mcpServers": {"x": {}}}, "exactly one of"),
        ({"mcpServers": {"x": {"url": "ftp://x"}}}, "http:// or https://"),
        ({"mcpServers": {"x": {"command": "c", "args": "a b"}}}, '"args" must be a list'),
        ({"mcpServers": {"bad name": {"command": "c"}}}, "must be 1-32 letters"),
    ]:
        with pytest.raises(ValueError, match=expected):
            config_mcp.parse(bad)
    modern = config_mcp.parse({"mcpServers": {"m": {"url": "http://h/mcp", "protocol": "auto"}}})
    assert McpExecutor(modern).endpoint(McpServer("m")).mode == "auto"
    assert McpExecutor(cfg).endpoint(McpServer("remote")).mode == "legacy"
    with pytest.raises(ValueError, match='"protocol" must be'):
        config_mcp.parse({"mcpServers": {"m": {"url": "http://h/mcp", "protocol": "2026-07-28"}}})
    path = tmp_path / "broken.json"
    path.write_text("{not json")
    parser = argparse.ArgumentParser()
    with pytest.raises(SystemExit):
        config_mcp.load_flag(parser, path)
    path.write_text(json.dumps({"mcpServers": {}}))
    loaded = config_mcp.load_flag(parser, path)
    assert loaded is not None and loaded.path == str(path)


SCHEMA = {
    "type": "object",
    "required": ["color"],
    "properties": {
        "color": {"type": "string", "maxLength": 10},
        "coats": {"type": "integer", "minimum": 1, "maximum": 3},
        "size": {"type": "string", "enum": ["s", "m"]},
        "urgent": {"type": "boolean"},
        "tags": {"type": "array", "items": {"enum": ["a", "b"]}},
    },
}
ASKED = Request("mcp-1", "input", "which?", data={"mcp_server": "s", "tool": "t", "requested_schema": SCHEMA})


def test_an_answer_is_checked_against_the_requested_schema() -> None:
    elicit_check.check(ASKED, Answer("mcp-1", True, {"color": "red", "coats": 2, "size": "m", "tags": ["a"]}))
    elicit_check.check(ASKED, Answer("mcp-1", False))  # a decline carries no content to check
    elicit_check.check(
        Request("r", "input", "p", data={"requested_schema": SCHEMA}), Answer("r", True)
    )  # not MCP
    found = elicit_check.problems(
        SCHEMA,
        {"coats": 9, "size": "xl", "urgent": "yes", "tags": ["c"], "x": 1, "color": "a very long color"},
    )
    assert found == [
        'field "coats" must be at most 3',
        'field "size" must be one of s, m',
        'field "urgent" must be a boolean',
        'field "tags" has values not offered: c',
        'field "x" is not in the requested schema (fields: color, coats, size, urgent, tags)',
        'field "color" must be at most 10 characters',
    ]
    with pytest.raises(InvalidArgument, match='field "color" is required'):
        elicit_check.check(ASKED, Answer("mcp-1", True, {}))


def test_results_join_text_and_name_other_blocks() -> None:
    result = CallToolResult(
        content=[
            TextContent(text="one"),
            ImageContent(data="A" * 16384, mime_type="image/png"),
            EmbeddedResource(resource=TextResourceContents(uri="file:///a.txt", text="hello")),
        ],
        structured_content={"n": 1},
        is_error=True,
    )
    out = tool_result(result, 1000)
    assert out.output == 'one\n\n[image image/png, 12 KB]\n\n[resource file:///a.txt]\nhello\n\n{"n":1}'
    assert out.is_error
    said = CallToolResult(content=[TextContent(text='{"n": 1}')], structured_content={"n": 1})
    assert tool_result(said, 1000).output == '{"n": 1}'
    assert tool_result(CallToolResult(content=[TextContent(text="x" * 50)]), 10).output.startswith(
        "x" * 10 + "\n[trunc"
    )


def test_a_listing_is_bounded_like_a_peer_reply() -> None:
    from mcp_types import Tool as McpTool

    agent = AgentDef("a")
    server = McpServer("big", "http://h/mcp")
    many = [McpTool(name=f"t{i}", input_schema={"type": "object"}) for i in range(300)]
    found: list[str] = []
    assert McpExecutor._offered(agent, server, many, found) == []
    assert found == [
        'agent "a": mcp server "big" lists 300 tools; the limit is 256 (name the ones to offer in its tools)'
    ]
    huge = McpTool(
        name="huge",
        description="d" * 5000,
        input_schema={"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(4000)}},
    )
    small = McpTool(name="small", description="d" * 5000, input_schema={"type": "object"})
    found = []
    offered = McpExecutor._offered(agent, server, [huge, small], found)
    assert [t.name for t in offered] == ["big__small"] and len(offered[0].description) == 4096
    assert found and 'tool "huge" has an input schema of' in found[0]
