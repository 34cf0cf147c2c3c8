"""Binding the daemon's small HTTP listeners (metrics, answer links) on ``host:port``.

Both listeners take the same address syntax and report the address they bound with the port
resolved (``127.0.0.1:0`` → ``127.0.0.1:41234``, IPv6 hosts in brackets), so Info and the log
can say where they serve; this is the one place that parses and prints it.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Awaitable, Callable

Serve = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def listen(serve: Serve, address: str, tls: ssl.SSLContext | None = None) -> tuple[asyncio.Server, str]:
    """Start serving ``serve`` on ``address``; the server and the bound address. Raises OSError."""
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    server = await asyncio.start_server(serve, host, int(port), ssl=tls)
    bound = server.sockets[0].getsockname()[1]
    return server, f"{'[' + host + ']' if ':' in host else host}:{bound}"


async def close(server: asyncio.Server | None) -> None:
    """Stop accepting and wait until the listening sockets are closed."""
    if server is not None:
        server.close()
        await server.wait_closed()
