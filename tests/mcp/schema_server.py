"""A real MCP server (the official SDK's lowlevel ``Server``) whose ``count`` tool declares an
output schema and, asked with ``{"bad": true}``, answers structured content that breaks it.

    python tests/mcp/schema_server.py --port PORT
"""

from __future__ import annotations

import argparse
from typing import Any

import mcp_types as types
import uvicorn
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server

COUNT = types.Tool(
    name="count",
    description="Count something.",
    input_schema={"type": "object", "properties": {"bad": {"type": "boolean"}}},
    output_schema={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
)


async def _list_tools(ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
                      ) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[COUNT])


async def _call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
                     ) -> types.CallToolResult:
    n: object = "many" if (params.arguments or {}).get("bad") else 3
    return types.CallToolResult(content=[types.TextContent(type="text", text=str(n))],
                                structured_content={"n": n})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    server = Server("schema-check", on_list_tools=_list_tools, on_call_tool=_call_tool)
    uvicorn.run(server.streamable_http_app(), host="127.0.0.1", port=parser.parse_args().port,
                log_level="warning")


if __name__ == "__main__":
    main()
