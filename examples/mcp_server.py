"""A small MCP server built with the official SDK, for the MCP demo and tests (docs/mcp.md).

    python examples/mcp_server.py --port 8765      # streamable HTTP at http://127.0.0.1:8765/mcp
    python examples/mcp_server.py --stdio          # over stdin/stdout (name it in --mcp-config)

Tools: ``add`` (plain), ``paint`` (asks which color: a form elicitation), ``connect_account``
(asks the user to visit a URL: a URL-mode elicitation), ``call_info`` (shows the ``_meta`` the
call came with), ``picture`` (an image block), ``summarize`` (asks the client's model to
sample, which the daemon refuses), ``slow`` (sleeps) and ``unlock`` (adds a tool ``secret`` and sends
``notifications/tools/list_changed``). With ``MCP_EXAMPLE_LOG=FILE`` every completed ``paint`` is
appended to FILE as one JSON line, so a test can count how often the tool really ran.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
from typing import Annotated, Any

from mcp.server.mcpserver import (
    AcceptedElicitation,
    Context,
    Elicit,
    ElicitationResult,
    MCPServer,
    Resolve,
)
from mcp.types import ImageContent, SamplingMessage, TextContent
from pydantic import BaseModel, Field

server = MCPServer("example")
# 1x1 transparent PNG
_PIXEL = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c6300010000050001"
        "0d0a2db40000000049454e44ae426082"
    )
).decode()


class Color(BaseModel):
    color: str = Field(description="the paint color")
    coats: int = Field(default=1, ge=1, le=3, description="how many coats")


@server.tool()
def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


@server.tool()
async def paint(wall: str, ctx: Context) -> str:
    """Paint a wall; asks the user which color."""
    answer = await ctx.elicit(f"Which color for the {wall} wall?", Color)
    if answer.action != "accept":
        return f"not painted: the user chose {answer.action}"
    text = f"painted the {wall} wall {answer.data.color} ({answer.data.coats} coat(s))"
    _record({"tool": "paint", "wall": wall, "color": answer.data.color, "coats": answer.data.coats})
    return text


def _ask_color(wall: str) -> Elicit[Color]:
    return Elicit(f"Which color for the {wall} wall?", Color)


@server.tool()
async def repaint(
    wall: str, choice: Annotated[ElicitationResult[Color], Resolve(_ask_color)], ctx: Context
) -> str:
    """Repaint a wall; asks the user which color the way the 2026-07-28 protocol asks (an
    input-required result), or on the open call with an older client."""
    if not isinstance(choice, AcceptedElicitation):
        return f"not repainted: the user chose {choice.action}"
    _record({"tool": "repaint", "wall": wall, "color": choice.data.color, "coats": choice.data.coats,
             "protocol": ctx.protocol_version})
    return f"repainted the {wall} wall {choice.data.color} ({choice.data.coats} coat(s))"


@server.tool()
async def connect_account(service: str, ctx: Context) -> str:
    """Connect an account at a service; the user signs in at a URL."""
    answer = await ctx.elicit_url(
        f"Sign in to {service} to connect it", f"https://{service}.example/oauth", f"connect-{service}"
    )
    return f"{service}: {answer.action}"


@server.tool()
def call_info(ctx: Context) -> str:
    """The _meta this call came with, as JSON."""
    meta: Any = ctx.request_context.meta or {}
    return json.dumps(
        {k: v for k, v in dict(meta).items() if k.startswith("toolnexus/") or k == "traceparent"}
    )


@server.tool()
def picture() -> list[TextContent | ImageContent]:
    """A picture and its caption."""
    return [
        TextContent(type="text", text="a pixel"),
        ImageContent(type="image", data=_PIXEL, mime_type="image/png"),
    ]


@server.tool()
async def summarize(text: str, ctx: Context) -> str:
    """Asks the client's model to summarize (sampling)."""
    reply = await ctx.request_context.session.create_message(
        [SamplingMessage(role="user", content=TextContent(type="text", text=text))], max_tokens=50
    )
    return str(reply.content)


@server.tool()
async def slow(seconds: float) -> str:
    """Takes its time."""
    await asyncio.sleep(seconds)
    return f"slept {seconds} s"


@server.tool()
async def unlock(ctx: Context) -> str:
    """Adds the tool ``secret`` and tells the client its tools changed."""
    if "secret" not in {t.name for t in await server.list_tools()}:
        server.add_tool(_secret, name="secret", description="Only there once unlocked.")
    await ctx.request_context.session.send_tool_list_changed()
    return "unlocked"


def _secret() -> str:
    return "the secret is 42"


def _record(entry: dict[str, Any]) -> None:
    path = os.environ.get("MCP_EXAMPLE_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--stdio", action="store_true")
    parser.add_argument("--json-response", action="store_true",
                        help="answer requests with JSON instead of an SSE stream (no elicitation then)")
    ns = parser.parse_args()
    if ns.stdio:
        server.run("stdio")
        return
    import uvicorn

    app = server.streamable_http_app(json_response=ns.json_response)
    uvicorn.run(app, host="127.0.0.1", port=ns.port, log_level="warning")


if __name__ == "__main__":
    main()
