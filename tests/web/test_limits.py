"""The HTTP edge's connection limits (toolnexus_daemon.web.limits) on a real listener on loopback:
idle and half-sent connections are dropped at the request deadline, a full per-peer cap evicts the
oldest connection that is not being answered (never one that is), and bodies are bounded."""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import httpx
import pytest
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from tests.ops.certs import make_certs
from toolnexus_daemon.answers.routes import HttpRequest, HttpResponse
from toolnexus_daemon.web import WebServer
from toolnexus_daemon.web import answers as answer_routes
from toolnexus_daemon.web.app import build
from toolnexus_daemon.web.limits import Limits

Serve = Callable[..., Awaitable[tuple[WebServer, str]]]


@pytest.fixture
async def serve() -> AsyncIterator[Serve]:
    servers: list[WebServer] = []

    async def start(app_routes: list[Route], limits: Limits) -> tuple[WebServer, str]:
        server = WebServer(build(app_routes), "tests", limits=limits)
        servers.append(server)
        return server, await server.start("127.0.0.1:0")

    yield start
    for server in servers:
        await server.close()


async def _hello(request: Request) -> Response:
    return PlainTextResponse("hello")


async def _closed_within(reader: asyncio.StreamReader, seconds: float) -> float:
    """Seconds until the server closed the connection (reading whatever it said before)."""
    started = time.monotonic()
    async with asyncio.timeout(seconds):
        while await reader.read(4096):
            pass
    return time.monotonic() - started


async def test_silent_half_sent_and_trickling_connections_are_dropped_at_the_deadline(serve: Serve) -> None:
    _, address = await serve([Route("/", _hello, methods=["GET", "POST"])], Limits(request_s=0.5))
    host, port = address.rsplit(":", 1)
    sent = [b"", b"GET / HT", b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nab"]
    conns = [await asyncio.open_connection(host, int(port)) for _ in sent]
    for (_, writer), data in zip(conns, sent, strict=True):
        writer.write(data)
    waited = await asyncio.gather(*(_closed_within(reader, 3) for reader, _ in conns))
    assert all(0.3 < s < 2 for s in waited), waited
    # a connection kept alive after a reply gets a fresh deadline for its next request
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    assert (await reader.readuntil(b"hello")).startswith(b"HTTP/1.1 200")
    writer.write(b"GET / HT")
    assert await _closed_within(reader, 3) < 2
    for _, w in [*conns, (reader, writer)]:
        w.close()


async def test_a_full_per_peer_cap_evicts_the_oldest_idle_connection(serve: Serve) -> None:
    server, address = await serve([Route("/", _hello)], Limits(per_peer=4, total=6))
    host, port = address.rsplit(":", 1)
    idle = [await asyncio.open_connection(host, int(port)) for _ in range(10)]
    await asyncio.sleep(0.2)
    assert len(server.gate) <= 4
    async with httpx.AsyncClient(timeout=5) as http:
        assert (await http.get(f"http://{address}/")).text == "hello"
    # the oldest were closed to make room; the youngest are still open
    assert await _closed_within(idle[0][0], 1) < 1
    assert not idle[-1][0].at_eof()
    for _, writer in idle:
        writer.close()


async def test_connections_being_answered_are_never_evicted(serve: Serve) -> None:
    release = asyncio.Event()

    async def slow(request: Request) -> Response:
        await release.wait()
        return PlainTextResponse("done")

    server, address = await serve([Route("/", slow)], Limits(per_peer=2))
    async with httpx.AsyncClient(timeout=5) as http:
        busy = [asyncio.create_task(http.get(f"http://{address}/")) for _ in range(2)]
        await asyncio.sleep(0.3)
        with pytest.raises(httpx.HTTPError):  # a third is refused: both in the way are busy
            await http.get(f"http://{address}/")
        release.set()
        assert [r.text for r in await asyncio.gather(*busy)] == ["done", "done"]


async def test_bodies_past_the_limit_are_413_whether_announced_or_streamed(serve: Serve) -> None:
    seen: list[HttpRequest] = []

    async def handler(req: HttpRequest) -> HttpResponse:
        seen.append(req)
        return HttpResponse(200, b'{"ok":true}')

    _, address = await serve(answer_routes.routes(handler, max_body=1024), Limits())
    url = f"http://{address}/x/a/token?code=1"

    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(8):
            yield b"x" * 200

    async with httpx.AsyncClient(timeout=5) as http:
        assert (await http.post(url, content=b"x" * 2000)).status_code == 413
        assert (await http.post(url, content=chunks())).status_code == 413
        ok = await http.request("PATCH", url, content=b"y" * 1000, headers={"X-Thing": "A"})
        assert ok.status_code == 200
    assert [(r.method, r.target, r.body, r.headers["x-thing"]) for r in seen] == [
        ("PATCH", "/x/a/token?code=1", b"y" * 1000, "A")]


async def test_a_tls_connection_that_never_shakes_hands_is_dropped(tmp_path: Path) -> None:
    certs = make_certs(tmp_path)
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(certs.server.cert, certs.server.key)
    server = WebServer(build([Route("/", _hello)]), "tests", limits=Limits(request_s=0.5), ssl_context=ctx)
    address = await server.start("127.0.0.1:0")
    host, port = address.rsplit(":", 1)
    try:
        silent = [await asyncio.open_connection(host, int(port)) for _ in range(20)]
        async with httpx.AsyncClient(verify=str(certs.ca), timeout=5) as http:
            assert (await http.get(f"https://{address}/")).text == "hello"
        waited = await asyncio.gather(*(_closed_within(reader, 3) for reader, _ in silent))
        assert all(s < 2 for s in waited), waited
        for _, writer in silent:
            writer.close()
    finally:
        await server.close()
