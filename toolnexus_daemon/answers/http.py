"""The answers listener's HTTP/1.1: h11 parses, asyncio streams carry, on the daemon's own loop.

h11 (already pinned: httpx speaks HTTP/1.1 through it) is a maintained, sans-I/O parser, so the
listener needs no web framework and no new dependency, and it runs on the daemon's event loop
where answering goes through the engine without locks. One request per connection (every reply
says ``Connection: close``); the head is bounded by h11, the body here (413 past ``max_body``,
checked against ``Content-Length`` before a byte of it is read), and the whole request by a read
deadline, so a slow or hostile client holds nothing for long.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import h11

from ..listen import close as close_listener
from ..listen import listen

log = logging.getLogger("toolnexus_daemon.answers")

READ_TIMEOUT_S = 10.0
# connections served at once; past it a new one is closed at once (a flood cannot hold the loop)
MAX_CONNECTIONS = 256
MAX_HEAD_BYTES = 16 * 1024
CHUNK = 16 * 1024


@dataclass(frozen=True)
class HttpRequest:
    method: str
    target: str  # path and query, as sent
    headers: dict[str, str]  # lower-case names; a repeated header keeps its last value
    body: bytes = b""


@dataclass(frozen=True)
class HttpResponse:
    status: int
    body: bytes = b""
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)


Handler = Callable[[HttpRequest], Awaitable[HttpResponse]]


class AnswersListenError(Exception):
    """The answers address could not be bound."""


class TooLarge(Exception):
    """The body is larger than the listener takes."""


class HttpServer:
    """Serves ``handler`` on one TCP address, over TLS when given a context."""

    def __init__(self, handler: Handler, *, max_body: int, ssl_context: ssl.SSLContext | None = None) -> None:
        self._handler = handler
        self._max_body = max_body
        self._ssl = ssl_context
        self._server: asyncio.Server | None = None
        self._active = 0

    async def start(self, address: str) -> str:
        """Listen on ``host:port``; returns it with the port resolved."""
        try:
            self._server, bound = await listen(self._serve, address, self._ssl)
        except OSError as exc:
            raise AnswersListenError(f"cannot serve answer links on {address}: {exc.strerror}") from exc
        return bound

    async def close(self) -> None:
        await close_listener(self._server)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._active >= MAX_CONNECTIONS:
            writer.close()
            return
        self._active += 1
        try:
            await self._exchange(reader, writer)
        finally:
            self._active -= 1

    async def _exchange(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD_BYTES)
        try:
            try:
                request = await asyncio.wait_for(self._read(conn, reader), READ_TIMEOUT_S)
                response = await self._handler(request)
            except TooLarge:
                request = HttpRequest("POST", "", {})
                response = HttpResponse(413, b'{"error":"the body is too large"}')
            except h11.RemoteProtocolError:
                request = HttpRequest("GET", "", {})
                response = HttpResponse(400, b'{"error":"not a valid HTTP/1.1 request"}')
            if conn.our_state in (h11.SEND_RESPONSE, h11.IDLE):
                await _send(conn, writer, response, head_only=request.method == "HEAD")
        except (TimeoutError, ConnectionError, ssl.SSLError, h11.LocalProtocolError, OSError):
            pass  # a client that hangs up, stalls or sends garbage gets nothing more
        except Exception:  # a bug answers 500 to nobody, but must not end the listener
            log.exception("answers listener failed on a request")
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _read(self, conn: h11.Connection, reader: asyncio.StreamReader) -> HttpRequest:
        head: h11.Request | None = None
        body = bytearray()
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                conn.receive_data(await reader.read(CHUNK))
            elif isinstance(event, h11.Request):
                head = event
                self._check_length(event)
            elif isinstance(event, h11.Data):
                body += event.data
                if len(body) > self._max_body:
                    raise TooLarge
            elif isinstance(event, h11.EndOfMessage) and head is not None:
                headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in head.headers}
                return HttpRequest(head.method.decode("ascii", "replace").upper(),
                                   head.target.decode("ascii", "replace"), headers, bytes(body))
            elif isinstance(event, h11.ConnectionClosed):
                raise ConnectionError("the client closed the connection")

    def _check_length(self, head: h11.Request) -> None:
        for name, value in head.headers:
            if name.lower() == b"content-length" and value.isdigit() and int(value) > self._max_body:
                raise TooLarge


async def _send(conn: h11.Connection, writer: asyncio.StreamWriter, response: HttpResponse, *,
                head_only: bool) -> None:
    headers = [("Content-Type", response.content_type), ("Content-Length", str(len(response.body))),
               ("Connection", "close"), *response.headers.items()]
    writer.write(conn.send(h11.Response(status_code=response.status, headers=headers)) or b"")
    if not head_only:
        writer.write(conn.send(h11.Data(data=response.body)) or b"")
    writer.write(conn.send(h11.EndOfMessage()) or b"")
    await writer.drain()
