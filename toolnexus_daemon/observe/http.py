"""The Prometheus endpoint (``--metrics-listen``): ``GET /metrics`` on the daemon's own event loop.

prometheus-client's bundled server runs on a thread, which would read the
engine's runtimes, buses and handle tallies while the loop changes them. This
one answers on the loop, so a scrape sees a consistent state without locks
and stops with the daemon. It speaks just enough HTTP/1.1 for a scraper:
one request per connection, bounded header size and read time.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from prometheus_client import CollectorRegistry, generate_latest

from ..listen import close as close_listener
from ..listen import listen

log = logging.getLogger("toolnexus_daemon.metrics")

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
READ_TIMEOUT_S = 5.0
MAX_HEADER_LINES = 100


class MetricsListenError(Exception):
    """The metrics address could not be bound."""


class MetricsServer:
    def __init__(self, registry: CollectorRegistry) -> None:
        self._registry = registry
        self._server: asyncio.Server | None = None

    async def start(self, address: str) -> str:
        """Listen on ``host:port``; returns it with the port resolved."""
        try:
            self._server, bound = await listen(self._serve, address)
        except OSError as exc:
            raise MetricsListenError(f"cannot serve metrics on {address}: {exc.strerror}") from exc
        return bound

    async def close(self) -> None:
        await close_listener(self._server)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            method, path = await asyncio.wait_for(_read_request(reader), READ_TIMEOUT_S)
            status, body = self._answer(method, path)
            head = (f"HTTP/1.1 {status}\r\nContent-Type: {CONTENT_TYPE}\r\n"
                    f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n")
            writer.write(head.encode() + (b"" if method == "HEAD" else body))
            await writer.drain()
        except (TimeoutError, ConnectionError, ValueError, asyncio.IncompleteReadError,
                asyncio.LimitOverrunError):
            pass  # a scraper that hangs up or sends garbage gets nothing
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    def _answer(self, method: str, path: str) -> tuple[str, bytes]:
        if method not in ("GET", "HEAD"):
            return "405 Method Not Allowed", b"only GET /metrics\n"
        if path.split("?", 1)[0] not in ("/metrics", "/"):
            return "404 Not Found", b"metrics are at /metrics\n"
        return "200 OK", generate_latest(self._registry)


async def _read_request(reader: asyncio.StreamReader) -> tuple[str, str]:
    """The method and path of one request; its headers are read and ignored."""
    line = (await reader.readline()).decode("latin-1").split()
    if len(line) < 2:
        raise ValueError("not an HTTP request")
    for _ in range(MAX_HEADER_LINES):
        if (await reader.readline()) in (b"\r\n", b"\n", b""):
            break
    return line[0].upper(), line[1]
