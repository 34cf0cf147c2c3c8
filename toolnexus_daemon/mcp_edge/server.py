"""``--mcp-listen``: the SDK's streamable-HTTP server at ``/mcp``, on the daemon's web stack.

The SDK's low-level ``Server`` carries the handlers of :class:`~.edge.Edge` and the tasks seam of
:mod:`.bridge`; its ``StreamableHTTPSessionManager`` (stateful sessions, SSE streams for calls
that ask or report progress) is mounted in a Starlette app served by :class:`~..web.WebServer`
with that listener's connection limits, the daemon's TLS certificate and, when the daemon has one,
the gRPC listener's bearer token (``Authorization: Bearer …``; 401 otherwise). The session
manager's task group lives in one task of the daemon's loop, from ``start`` to ``close``.
"""

from __future__ import annotations

import asyncio
import hmac
import ssl
from typing import Any

from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from .. import __version__
from ..config import Tls
from ..engine.verbs.engine import Engine
from ..web.server import WebListenError, WebServer
from .bridge import TaskBridge
from .edge import Edge
from .verbs import Remote

PATH = "/mcp"
UNAUTHORIZED = "missing or wrong bearer token: send Authorization: Bearer <token> (the daemon's --token-file)"
LOOPBACK_HOSTS = ["127.0.0.1:*", "localhost:*", "[::1]:*"]


def mcp_server(edge: Edge) -> Server[Any]:
    """The SDK server: tools from the exposed registries, tasks through the bridge."""
    server: Server[Any] = Server("toolnexus-daemon", version=__version__,
                                 instructions="Each tool runs one agent of this daemon with a prompt.",
                                 on_list_tools=edge.list_tools, on_call_tool=edge.call_tool)
    server.middleware.append(TaskBridge(edge))
    return server


class BearerToken:
    """Refuses a request without the daemon's token (compared in constant time) with 401."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self._app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not self._allowed(scope):
            response = JSONResponse({"error": "unauthorized", "message": UNAUTHORIZED}, status_code=401,
                                    headers={"WWW-Authenticate": "Bearer"})
            await response(scope, receive, send)
            return
        await self._app(scope, receive, send)

    def _allowed(self, scope: Scope) -> bool:
        presented = next((v for k, v in scope["headers"] if k == b"authorization"), b"")
        return hmac.compare_digest(presented, self._expected)


class McpListener:
    """The ``--mcp-listen`` listener: bind with :meth:`start`, stop with :meth:`close`."""

    def __init__(self, engine: Engine, exposed: tuple[str, ...], *, ready: Any, token: str,
                 tls: Tls | None, host: str, remote: Remote | None = None) -> None:
        self.edge = Edge(engine, exposed, ready, remote)
        security = None
        if host in ("127.0.0.1", "localhost", "::1"):  # a browser page must not reach it by rebinding DNS
            security = TransportSecuritySettings(enable_dns_rebinding_protection=True,
                                                 allowed_hosts=LOOPBACK_HOSTS, allowed_origins=[])
        self._manager = StreamableHTTPSessionManager(mcp_server(self.edge), security_settings=security)
        app: ASGIApp = Starlette(routes=[Route(PATH, StreamableHTTPASGIApp(self._manager))])
        if token:
            app = BearerToken(app, token)
        self._web = WebServer(app, "MCP", ssl_context=_ssl(tls))
        self._stop = asyncio.Event()
        self._running: asyncio.Task[None] | None = None

    async def start(self, address: str) -> str:
        """Bind ``address`` and run the session manager; returns the bound address."""
        started = asyncio.Event()

        async def run() -> None:
            async with self._manager.run():
                started.set()
                await self._stop.wait()

        self._running = asyncio.ensure_future(run())
        await started.wait()
        return await self._web.start(address)

    async def close(self) -> None:
        await self._web.close()
        self._stop.set()
        if self._running is not None:
            await self._running
        await self.edge.close()


def _ssl(tls: Tls | None) -> ssl.SSLContext | None:
    """The daemon's certificate; with ``--tls-client-ca`` a client certificate is required, as on
    the gRPC listener."""
    if tls is None:
        return None
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        ctx.load_cert_chain(tls.cert, tls.key)
        if tls.client_ca is not None:
            ctx.load_verify_locations(tls.client_ca)
            ctx.verify_mode = ssl.CERT_REQUIRED
    except (OSError, ssl.SSLError) as exc:
        raise WebListenError(f"cannot load --tls-cert/--tls-key for the MCP listener: {exc}") from exc
    return ctx
