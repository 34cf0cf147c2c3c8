"""The MCP sessions' HTTP transport against a real socket server: a response closed before its end
is read to its end so the connection is kept, and a stream that does not end costs a bounded wait."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx2

from toolnexus_daemon.tools import mcp_http
from toolnexus_daemon.tools.mcp_http import KeepAlive

HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
EVENT = b'data: {"answer": 1}\n\n'


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


@asynccontextmanager
async def _server(ends: bool) -> AsyncIterator[tuple[str, list[int]]]:
    """An HTTP/1.1 server on 127.0.0.1 answering every request with one SSE event; the stream's
    end follows 50 ms later when ``ends``, never otherwise. Yields its URL and the connections
    accepted so far (a list that grows)."""
    accepted: list[int] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(1)
        try:
            while await reader.readuntil(b"\r\n\r\n"):
                writer.write(HEAD + _chunk(EVENT))
                await writer.drain()
                if not ends:
                    await asyncio.sleep(3600)
                await asyncio.sleep(0.05)
                writer.write(b"0\r\n\r\n")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/mcp", accepted
    finally:
        server.close()


async def _first_event_then_close(client: httpx2.AsyncClient, url: str) -> float:
    """What the SDK does with a call's SSE response: read until the message, then close."""
    async with client.stream("POST", url, content=b"{}") as response:
        async for part in response.aiter_bytes():
            assert EVENT in part
            break
        started = time.monotonic()
        await response.aclose()
        return time.monotonic() - started


async def test_a_response_closed_early_is_read_to_its_end_and_its_connection_kept() -> None:
    async with _server(ends=True) as (url, accepted):
        async with httpx2.AsyncClient(transport=KeepAlive()) as client:
            for _ in range(5):
                await _first_event_then_close(client, url)
        assert len(accepted) == 1


async def test_a_stream_that_does_not_end_is_closed_after_the_bound() -> None:
    async with _server(ends=False) as (url, accepted):
        async with httpx2.AsyncClient(transport=KeepAlive()) as client:
            waited = await _first_event_then_close(client, url)
            await _first_event_then_close(client, url)
        assert mcp_http.DRAIN_S * 0.8 <= waited < mcp_http.DRAIN_S + 2.0
        assert len(accepted) == 2  # the first connection could not be kept
