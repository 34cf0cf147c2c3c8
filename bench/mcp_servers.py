"""The MCP servers ``bench.mcp_call`` measures against, both built with the official SDK.

``--style high``: ``examples/mcp_server.py`` itself (the SDK's high-level ``MCPServer``: a
decorated function whose arguments are checked by a pydantic model built from its signature, and
whose ``str`` return becomes a text block plus ``structuredContent`` checked against the output
schema the SDK derives). ``--style low``: the same ``add`` on the SDK's lowlevel ``Server`` (one
``on_call_tool`` handler that checks its arguments itself and returns a text block). Both are
served the same way (``streamable_http_app`` under uvicorn), with the session manager's
``--json-response`` and ``--stateless`` modes. ``--no-otel`` drops the SDK server's
OpenTelemetry middleware (on by default, a no-op span per message without an exporter).

    python -m bench.mcp_servers --style low --port 8766 [--json-response] [--stateless] [--no-otel]
"""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp.server._otel import OpenTelemetryMiddleware
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server

ROOT = Path(__file__).resolve().parent.parent

ADD = types.Tool(
    name="add",
    description="Add two integers.",
    input_schema={
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    },
)


async def _list_tools(ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
                      ) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[ADD])


async def _call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
                     ) -> types.CallToolResult:
    args = params.arguments or {}
    a, b = args.get("a"), args.get("b")
    if params.name != "add":
        return _error(f"no tool {params.name!r}")
    if type(a) is not int or type(b) is not int:  # the schema's "integer", bools excluded
        return _error("add takes two integers a and b")
    return types.CallToolResult(content=[types.TextContent(type="text", text=str(a + b))])


def _error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


def lowlevel() -> Server[Any]:
    # get_tool_input_schema: on the 2026-07-28 protocol the SDK checks a call's Mcp-Param-* headers
    # against the tool's input schema; without it, it runs the tools/list handler for every call
    return Server("bench-lowlevel", on_list_tools=_list_tools, on_call_tool=_call_tool,
                  get_tool_input_schema=lambda name: ADD.input_schema if name == ADD.name else None)


def highlevel() -> Any:
    """``examples/mcp_server.py``'s ``MCPServer``, loaded from its file (examples/ is no package)."""
    spec = importlib.util.spec_from_file_location("mcp_example_server", ROOT / "examples" / "mcp_server.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--style", choices=("high", "low"), default="high")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--json-response", action="store_true")
    parser.add_argument("--stateless", action="store_true")
    parser.add_argument("--no-otel", action="store_true")
    ns = parser.parse_args()
    server = highlevel() if ns.style == "high" else lowlevel()
    if ns.no_otel:  # the same list on both: MCPServer.middleware is its lowlevel Server's
        server.middleware[:] = [m for m in server.middleware if not isinstance(m, OpenTelemetryMiddleware)]
    app = server.streamable_http_app(json_response=ns.json_response, stateless_http=ns.stateless)
    import uvicorn

    uvicorn.run(app, host="127.0.0.1", port=ns.port, log_level="warning")


if __name__ == "__main__":
    main()
