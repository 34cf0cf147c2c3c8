"""The daemon's streamable-HTTP client transport (``mcp_http``) under the SDK's client, against a
scripted HTTP/1.1 server on 127.0.0.1: what the example servers never do (a 202 or an error
status for a request, an SSE response that ends early with or without event ids, a redirect, a
dead server, a call let go while its stream is open) and the headers every request carries."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from toolnexus_daemon.tools import mcp_http
from toolnexus_daemon.tools.mcp_http import HttpTransport, KeepAlive

SESSION = "s-1"


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any] = field(default_factory=dict)


# what the server sends for a request: whole responses, written one after the other with a pause
# between them (a stream's parts), and whether the connection then stays open without an end
Reply = tuple[list[bytes], bool]
Script = Callable[[Request], Awaitable[Reply | None]]


def json_reply(obj: object, status: int = 200, headers: dict[str, str] | None = None) -> Reply:
    body = json.dumps(obj).encode()
    extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
    head = f"HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n"
    return [f"{head}{extra}\r\n".encode() + body], False


def plain_reply(status: int, headers: dict[str, str] | None = None, body: bytes = b"") -> Reply:
    extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
    return [f"HTTP/1.1 {status} X\r\ncontent-length: {len(body)}\r\n{extra}\r\n".encode() + body], False


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def sse_reply(events: list[str], *, ends: bool = True) -> Reply:
    """An SSE response of ``events`` (each the text of one event), ended or left open."""
    parts = [b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"]
    parts += [_chunk(e.encode() + b"\n\n") for e in events]
    if ends:
        parts.append(b"0\r\n\r\n")
    return parts, not ends


def message(obj: dict[str, Any], event_id: str = "") -> str:
    return (f"id: {event_id}\n" if event_id else "") + "event: message\ndata: " + json.dumps(obj)


def result(rid: object, res: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "result": res}


ADDED = {"content": [{"type": "text", "text": "3"}], "isError": False}
# a result past the transport's bound on one message
HUGE = {"content": [{"type": "text", "text": "x" * (mcp_http.MAX_MESSAGE_BYTES + 1)}], "isError": False}


def chunked_json_reply(obj: object) -> Reply:
    """A JSON response with no length given: sent in 1 MiB chunks."""
    body = json.dumps(obj).encode()
    parts = [b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n"]
    parts += [_chunk(body[i:i + (1 << 20)]) for i in range(0, len(body), 1 << 20)]
    return [*parts, b"0\r\n\r\n"], False


async def basics(req: Request) -> Reply | None:
    """A server that knows sessions: initialize, notifications (202), no GET stream (405),
    DELETE, a listing of ``add``."""
    if req.method == "GET":
        return plain_reply(405)
    if req.method == "DELETE":
        return plain_reply(200)
    method, rid = req.body.get("method"), req.body.get("id")
    if rid is None or "result" in req.body or "error" in req.body:
        return plain_reply(202)
    if method == "initialize":
        init = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                "serverInfo": {"name": "scripted", "version": "1"}}
        return json_reply(result(rid, init), headers={"mcp-session-id": SESSION})
    if method == "tools/list":
        return json_reply(result(rid, {"tools": [{"name": "add", "inputSchema": {"type": "object"}}]}))
    return None


@dataclass
class Served:
    url: str
    seen: list[Request]  # the requests read so far
    server: asyncio.Server
    connections: list[asyncio.StreamWriter]

    async def stop(self) -> None:
        """Stop listening and close every connection (a server gone)."""
        self.server.close()
        for writer in self.connections:
            writer.close()
        await self.server.wait_closed()


@asynccontextmanager
async def scripted(script: Script) -> AsyncIterator[Served]:
    """The server: ``script`` first, then ``basics``."""
    seen: list[Request] = []
    connections: list[asyncio.StreamWriter] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(writer)
        try:
            while True:
                head = (await reader.readuntil(b"\r\n\r\n")).decode()
                line, *rows = head.split("\r\n")
                method, path, _ = line.split(" ")
                headers = {k.lower(): v.strip() for k, v in (r.split(":", 1) for r in rows if r)}
                raw = await reader.readexactly(int(headers.get("content-length", "0")))
                req = Request(method, path, headers, json.loads(raw) if raw else {})
                seen.append(req)
                reply = await script(req) or await basics(req)
                assert reply is not None, f"nothing scripted for {req}"
                parts, stays_open = reply
                for part in parts:
                    writer.write(part)
                    await writer.drain()
                    await asyncio.sleep(0.01)
                if stays_open:
                    await asyncio.sleep(3600)
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass  # (cancelled: the test is over)
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield Served(f"http://127.0.0.1:{port}/mcp", seen, server, connections)
    finally:
        server.close()


@asynccontextmanager
async def connected(url: str) -> AsyncIterator[Client]:
    async with httpx2.AsyncClient(transport=KeepAlive(), timeout=10.0) as http:
        async with Client(HttpTransport(url, http), mode="legacy", cache=None) as client:
            yield client


def _calls(seen: list[Request]) -> list[Request]:
    return [r for r in seen if r.body.get("method") == "tools/call"]


async def test_the_session_id_and_version_go_on_later_requests_and_the_session_is_deleted() -> None:
    async def script(req: Request) -> Reply | None:
        if req.body.get("method") == "tools/call":
            return json_reply(result(req.body["id"], ADDED))
        return None

    async with scripted(script) as served:
        async with connected(served.url) as client:
            done = await client.session.call_tool("add", {"a": 1, "b": 2})
            assert done.content[0].text == "3"  # type: ignore[union-attr]
        first, *later = served.seen
        assert first.body["method"] == "initialize" and "mcp-session-id" not in first.headers
        assert later and all(r.headers.get("mcp-session-id") == SESSION for r in later)
        assert all(r.headers.get("mcp-protocol-version") == "2025-11-25" for r in later if r.method == "POST")
        assert served.seen[-1].method == "DELETE"


@pytest.mark.parametrize(
    ("reply", "code", "words"),
    [
        (plain_reply(202), -32600, "202 Accepted"),
        (plain_reply(500, body=b"boom"), -32603, "Server returned an error response"),
        (json_reply({"jsonrpc": "2.0", "id": None, "error": {"code": -32602, "message": "bad a"}}, 400),
         -32602, "bad a"),
        (plain_reply(200, {"content-type": "text/plain"}, b"hi"), -32600, "Unexpected content type"),
        (json_reply({"no": "jsonrpc"}), -32700, "Failed to parse JSON response"),
        (plain_reply(307, {"location": "http://127.0.0.2:1/elsewhere"}), -32600, "Redirect to"),
        (json_reply(result(2, HUGE)), -32700, "the limit is 4194304"),
        (chunked_json_reply(result(2, HUGE)), -32700, "over 4194304 bytes"),
    ],
    ids=["202", "500", "400-jsonrpc-error", "text", "not-jsonrpc", "redirect-off-origin", "too-large",
         "too-large-chunked"],
)
async def test_a_request_the_server_does_not_answer_fails_with_what_it_got(
    reply: Reply, code: int, words: str
) -> None:
    async def script(req: Request) -> Reply | None:
        return reply if req.body.get("method") == "tools/call" else None

    async with scripted(script) as served:
        async with connected(served.url) as client:
            with pytest.raises(MCPError) as caught:
                async with asyncio.timeout(5):
                    await client.session.call_tool("add", {"a": 1, "b": 2})
            assert caught.value.error.code == code and words in caught.value.error.message


async def test_a_redirect_within_the_origin_is_followed() -> None:
    async def script(req: Request) -> Reply | None:
        if req.body.get("method") == "tools/call" and req.path == "/mcp":
            return plain_reply(307, {"location": "/mcp/"})
        if req.body.get("method") == "tools/call":
            return json_reply(result(req.body["id"], ADDED))
        return None

    async with scripted(script) as served:
        async with connected(served.url) as client:
            done = await client.session.call_tool("add", {"a": 1, "b": 2})
        assert done.content[0].text == "3"  # type: ignore[union-attr]
        assert [r.path for r in _calls(served.seen)] == ["/mcp", "/mcp/"]


async def test_an_sse_response_that_ends_without_its_result_is_an_error() -> None:
    async def script(req: Request) -> Reply | None:
        if req.body.get("method") == "tools/call":
            return sse_reply([message({"jsonrpc": "2.0", "method": "notifications/progress",
                                       "params": {"progressToken": 1, "progress": 1}})])
        return None

    async with scripted(script) as served:
        async with connected(served.url) as client:
            with pytest.raises(MCPError, match="SSE stream ended without a response"):
                async with asyncio.timeout(5):
                    await client.session.call_tool("add", {"a": 1, "b": 2})


async def test_an_sse_response_with_event_ids_is_resumed_from_the_last_one() -> None:
    calls: list[object] = []

    async def script(req: Request) -> Reply | None:
        if req.body.get("method") == "tools/call":  # a priming event, then the stream is closed
            calls.append(req.body["id"])
            return sse_reply(["id: e1\nretry: 20\nevent: message\ndata: "])
        if req.method == "GET" and req.headers.get("last-event-id") == "e1":
            return sse_reply([message(result(calls[0], ADDED), "e2")])
        return None

    async with scripted(script) as served:
        async with connected(served.url) as client:
            async with asyncio.timeout(5):
                done = await client.session.call_tool("add", {"a": 1, "b": 2})
        assert done.content[0].text == "3"  # type: ignore[union-attr]
        resumed = [r for r in served.seen if r.headers.get("last-event-id")]
        assert [r.method for r in resumed] == ["GET"] and resumed[0].headers["mcp-session-id"] == SESSION


async def test_a_call_to_a_server_gone_fails_with_the_http_error() -> None:
    async def script(req: Request) -> Reply | None:
        return None

    async with scripted(script) as served:
        async with connected(served.url) as client:
            await client.session.list_tools()
            await served.stop()
            # the server is gone: the next call meets a refused connection (or, if it goes on the
            # kept one before its close is seen, a read that fails)
            gone = "^tools/call failed: (ConnectError|ReadError|RemoteProtocolError)"
            with pytest.raises(MCPError, match=gone):
                async with asyncio.timeout(5):
                    await client.session.call_tool("add", {"a": 1, "b": 2})


async def test_a_call_let_go_closes_its_open_stream_at_once() -> None:
    async def script(req: Request) -> Reply | None:
        if req.body.get("method") == "tools/call":  # the result never comes, the stream stays open
            return sse_reply([], ends=False)
        return None

    async with scripted(script) as served:
        async with connected(served.url) as client:
            call = asyncio.create_task(client.session.call_tool("add", {"a": 1, "b": 2}))
            while not _calls(served.seen):
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.05)
            started = time.monotonic()
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
            # without reading for the end that never comes (the drain's bound)
            assert time.monotonic() - started < mcp_http.DRAIN_S / 2
        # on the handshake protocol the cancellation is also said
        cancelled = [r for r in served.seen if r.body.get("method") == "notifications/cancelled"]
        assert [r.body["params"]["requestId"] for r in cancelled] == [_calls(served.seen)[0].body["id"]]


async def test_a_stream_is_read_no_faster_than_the_session_takes_its_messages(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(mcp_http, "MAX_BACKLOG", 2)
    backlog: list[int] = []
    put = mcp_http._Inbox.put

    def counting(inbox: mcp_http._Inbox, item: mcp_http.Inbound) -> bool:
        done = put(inbox, item)
        backlog.append(len(inbox._items))
        return done

    monkeypatch.setattr(mcp_http._Inbox, "put", counting)
    note = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "x"}}

    async def script(req: Request) -> Reply | None:
        if req.body.get("method") == "tools/call":  # 40 messages and the result in one write
            head, *events = sse_reply([message(note)] * 40 + [message(result(req.body["id"], ADDED))])[0]
            return [head + b"".join(events)], False
        return None

    async with scripted(script) as served:
        async with connected(served.url) as client:
            async with asyncio.timeout(5):
                done = await client.session.call_tool("add", {"a": 1, "b": 2})
    assert done.content[0].text == "3"  # type: ignore[union-attr]
    assert len(backlog) > 40 and max(backlog) <= 2
