"""The streamable-HTTP client transport of the daemon's MCP sessions (docs/mcp.md).

The SDK's ``ClientSession`` runs over any pair of ``SessionMessage`` streams; this is such a pair
for one server URL. Each message the session writes is sent by the writing task itself: one POST
on the session's kept-alive ``httpx2`` client, whose answer (a JSON body, or an SSE stream parsed
with ``httpx2.EventSource``, as the SDK does) is put on the read stream as it comes. The SDK's own
transport hands every message to a writer task that opens a task group and a task per POST; on a
call that is most of what the SDK's client costs beyond the HTTP exchange itself. Messages stay
the SDK's ``JSONRPCMessage`` models both ways: nothing here writes JSON-RPC by hand.

What the SDK's transport does and this one keeps: the ``mcp-session-id`` the server gives at
``initialize`` and the negotiated ``MCP-Protocol-Version`` on every later request; the standalone
GET stream for what the server sends outside a call (``tools/list_changed``, a request of its
own), opened after ``notifications/initialized`` and reopened a bounded number of times; an SSE
response that ends before its result resumed by GET with ``Last-Event-ID`` when the server gave
event ids; redirects followed only within the endpoint's origin; a request answered 202, by a
non-JSON-RPC error status or by a body that does not parse resolved with an error instead of left
waiting; ``notifications/cancelled`` not posted on the 2026-07-28 protocol (closing the call's
response is the cancellation there); ``DELETE`` of the session when it is left. An HTTP failure
(connection refused, reset) ends the request that met it with an error naming it; a message that
is not a request is dropped then, as the SDK's transport drops it. A server's streams are read no
faster than the session takes their messages. What it leaves out: resuming a request from a
resumption token its caller gives (the daemon gives none; such a request is simply sent).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from collections.abc import AsyncIterator
from types import TracebackType

import anyio
import httpx2
from mcp.shared._httpx_utils import (
    next_request_within_origin,
    redirect_location,
    request_within_origin,
    sse_within_origin,
)
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp.shared.jsonrpc_dispatcher import cancelled_request_id_from_params
from mcp.shared.message import ClientMessageMetadata, SessionMessage
from mcp_types import (
    CONNECTION_CLOSED,
    INTERNAL_ERROR,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    ErrorData,
    JSONRPCError,
    JSONRPCMessage,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
    RequestId,
    jsonrpc_message_adapter,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

log = logging.getLogger("toolnexus_daemon.tools.mcp")

MCP_SESSION_ID = "mcp-session-id"
LAST_EVENT_ID = "last-event-id"
# one message larger than this is refused, as one SSE event or as a JSON body: a server cannot make
# the daemon hold more for it (what reaches the model is cut to --max-tool-output-bytes later)
MAX_MESSAGE_BYTES = 4 * 1024 * 1024
# a GET stream (standalone, or resuming a call's response) that fails is reopened this many times
MAX_RECONNECTS = 2
# the wait before reopening when the server gave no ``retry``
RECONNECT_DELAY_S = 1.0
# messages read from the server and not yet taken by the session; past it, reading its streams waits
MAX_BACKLOG = 256
# leaving the session (its DELETE) is bounded by the session's close, this by itself too
DELETE_TIMEOUT_S = 5.0

# a session's HTTP connections: its GET stream, the open call's POST, an elicitation's reply POST and
# one still being drained; past it a request waits for a connection (the client's pool timeout)
MAX_CONNECTIONS_PER_SESSION = 8
# an idle connection is dropped before the 5 s after which common servers (uvicorn, Node) close
# theirs, so a call is not sent on a connection the server is closing
KEEPALIVE_S = 4.0
# what is left of a response stream the SDK closes once it has its message: read this long and this
# much at most so the connection is kept alive; past either bound the connection is closed, as before
DRAIN_S = 0.5
DRAIN_MAX_BYTES = 65_536

_POST_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}

Inbound = SessionMessage | Exception


class TooLarge(Exception):
    """A response body past ``MAX_MESSAGE_BYTES``."""


async def _bounded(response: httpx2.Response) -> bytes:
    """The body of ``response``, read no further than ``MAX_MESSAGE_BYTES``."""
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_MESSAGE_BYTES:
        raise TooLarge(f"the body is {declared} bytes; the limit is {MAX_MESSAGE_BYTES}")
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) > MAX_MESSAGE_BYTES:
            raise TooLarge(f"the body is over {MAX_MESSAGE_BYTES} bytes, the limit")
    return bytes(body)


class HttpTransport:
    """One server's streamable-HTTP transport: enter it for the ``(read, write)`` pair a
    ``ClientSession`` runs over; leaving it deletes the server's session and ends its GET stream.
    ``client`` is the caller's (its headers, timeouts, connection pool) and stays open."""

    def __init__(self, url: str, client: httpx2.AsyncClient) -> None:
        self.url = url
        self.client = client
        self.session_id: str | None = None
        self._version: str | None = None
        self._inbox = _Inbox()
        self._get_task: asyncio.Task[None] | None = None
        self._writer = _Writer(self)
        self._closing: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> tuple[_Inbox, _Writer]:
        return self._inbox, self._writer

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._writer.closed = True
        if self._closing:  # responses still being read to their end (each bounded)
            await asyncio.gather(*self._closing, return_exceptions=True)
        task, self._get_task = self._get_task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        try:
            if self.session_id is not None:
                await self._delete()
        finally:
            self._inbox.end()

    # ------------------------------------------------------------------ what the session writes

    async def send(self, message: SessionMessage) -> None:
        """POST one message; a request's answer is on the read stream when this returns (or, for
        an SSE response, as its events come while this reads it)."""
        msg = message.message
        meta = message.metadata if isinstance(message.metadata, ClientMessageMetadata) else None
        if self._cancel_to_drop(msg):
            return
        if isinstance(msg, JSONRPCRequest) and msg.method == "initialize":
            self._version = None  # the negotiation itself: no version a probe may have stamped
        elif meta is not None and meta.headers is not None:
            self._version = meta.headers.get(MCP_PROTOCOL_VERSION_HEADER, self._version)
        headers = self._headers()
        if meta is not None and meta.headers is not None:
            headers.update(meta.headers)
        body = msg.model_dump_json(by_alias=True, exclude_unset=True).encode()
        try:
            await self._exchange(msg, body, headers)
        except httpx2.HTTPError as exc:  # the server is gone, or the connection broke
            why = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            if isinstance(msg, JSONRPCRequest):
                self._fail(msg.id, f"{msg.method} failed: {why}")
            else:  # nobody waits on it; the SDK's transport drops it the same way
                log.debug("mcp message not delivered: %s", why)
            return
        if isinstance(msg, JSONRPCNotification) and msg.method == "notifications/initialized":
            self._open_get_stream()

    async def _exchange(self, msg: JSONRPCMessage, body: bytes, headers: dict[str, str]) -> None:
        response = await self._post(body, headers)
        unread = False
        try:
            if isinstance(msg, JSONRPCRequest):
                if msg.method == "initialize" and response.status_code < 300:
                    self.session_id = response.headers.get(MCP_SESSION_ID) or self.session_id
                unread = await self._answer(msg.id, response)
            elif response.status_code >= 300:
                log.debug("mcp server refused a message: HTTP %s", response.status_code)
        except BaseException:
            # the call was let go (cancelled) or its stream broke: reading the rest would only
            # delay whoever let it go, so the connection is closed, not drained
            if isinstance(response.stream, Drained):
                response.stream.discard()
            await response.aclose()
            raise
        if unread:
            self._close_later(response)
        else:
            await response.aclose()

    def _cancel_to_drop(self, msg: JSONRPCMessage) -> bool:
        """At 2026-07-28 closing a request's response is its cancellation, and the POST of the
        request being cancelled was in the task being cancelled: its ``notifications/cancelled``
        has nothing left to do (before, it is the signal, and is sent)."""
        return (
            isinstance(msg, JSONRPCNotification)
            and msg.method == "notifications/cancelled"
            and self._version in MODERN_PROTOCOL_VERSIONS
            and cancelled_request_id_from_params(msg.params) is not None
        )

    async def _post(self, body: bytes, headers: dict[str, str]) -> httpx2.Response:
        """POST ``body``, following a redirect only within the endpoint's origin (as the SDK's
        transport does); the response is open for its body to be read."""
        request = self.client.build_request("POST", self.url, content=body, headers=headers)
        followed = 0
        while True:
            response = await self.client.send(request, stream=True, follow_redirects=False)
            follow = next_request_within_origin(response)
            if follow is None or followed == self.client.max_redirects:
                return response
            try:
                await response.aread()
            finally:
                await response.aclose()
            request, followed = follow, followed + 1

    def _close_later(self, response: httpx2.Response) -> None:
        """Close a response whose answer was read but not its end, off the caller's way: closing
        reads the rest (the session's ``KeepAlive``, bounded) so the connection is kept."""
        task = asyncio.get_running_loop().create_task(response.aclose())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    def _headers(self) -> dict[str, str]:
        headers = dict(_POST_HEADERS)
        if self.session_id is not None:
            headers[MCP_SESSION_ID] = self.session_id
        if self._version is not None:
            headers[MCP_PROTOCOL_VERSION_HEADER] = self._version
        return headers

    async def _answer(self, rid: RequestId, response: httpx2.Response) -> bool:
        """Put the answer to request ``rid`` that ``response`` carries on the read stream; True if
        it came before the response's end (an SSE stream), which is left to read."""
        status = response.status_code
        if status == 202:  # a request's response comes on its POST: 202 says none will
            self._fail(rid, "server answered a request with 202 Accepted", INVALID_REQUEST)
            return False
        location = redirect_location(response)
        if location is not None:
            self._fail(rid, f"Redirect to {location} not followed; use that URL as the endpoint if it is "
                            "the intended server", INVALID_REQUEST)
            return False
        kind = response.headers.get("content-type", "").lower()
        if status >= 400:
            await self._refused(rid, response, kind)
            return False
        if kind.startswith("application/json"):
            try:
                self._deliver(jsonrpc_message_adapter.validate_json(await _bounded(response), by_name=False))
            except (httpx2.StreamError, ValidationError, TooLarge) as exc:
                self._fail(rid, f"Failed to parse JSON response: {exc}", PARSE_ERROR)
            return False
        if kind.startswith("text/event-stream"):
            return await self._read_events(rid, response)
        self._fail(rid, f"Unexpected content type: {kind}", INVALID_REQUEST)
        return False

    async def _refused(self, rid: RequestId, response: httpx2.Response, kind: str) -> None:
        """An error status: the JSON-RPC error in its body if there is one, else one that says
        what the status means (404 on a session: the server no longer knows it)."""
        if kind.startswith("application/json"):
            try:
                parsed = jsonrpc_message_adapter.validate_json(await _bounded(response), by_name=False)
            except (httpx2.StreamError, ValidationError, TooLarge):
                parsed = None
            if isinstance(parsed, JSONRPCError):  # its id may be null: the request's own correlates
                return self._deliver(JSONRPCError(jsonrpc="2.0", id=rid, error=parsed.error))
        if response.status_code == 404:
            if self.session_id is None:
                return self._fail(rid, "Not Found", METHOD_NOT_FOUND)
            return self._fail(rid, "Session terminated", INVALID_REQUEST)
        self._fail(rid, "Server returned an error response", INTERNAL_ERROR)

    async def _read_events(self, rid: RequestId, response: httpx2.Response) -> bool:
        """Read a request's SSE response until its result (True: the rest is unread); resumed by
        GET if it ends first and the server gave event ids."""
        last_id, retry_ms = None, None
        try:
            async for sse in httpx2.EventSource(response, max_event_size=MAX_MESSAGE_BYTES):
                last_id = sse.id or last_id
                retry_ms = sse.retry if sse.retry is not None else retry_ms
                if self._event(sse, rid):
                    return True
                await self._inbox.room()
        except httpx2.SSEError as exc:
            self._fail(rid, f"SSE stream failed: {exc}")
            return False
        except httpx2.HTTPError:
            log.debug("mcp response stream ended", exc_info=True)
        if last_id is None:
            self._fail(rid, "SSE stream ended without a response")
            return False
        await response.aclose()
        await self._resume(rid, last_id, retry_ms)
        return False

    async def _resume(self, rid: RequestId, last_id: str, retry_ms: int | None) -> None:
        failures = 0
        while failures < MAX_RECONNECTS:
            await asyncio.sleep(retry_ms / 1000 if retry_ms is not None else RECONNECT_DELAY_S)
            headers = self._headers()
            headers[LAST_EVENT_ID] = last_id
            try:
                async with sse_within_origin(
                    self.client, self.url, headers=headers, max_event_size=MAX_MESSAGE_BYTES
                ) as events:
                    events.response.raise_for_status()
                    async for sse in events:
                        last_id = sse.id or last_id
                        retry_ms = sse.retry if sse.retry is not None else retry_ms
                        if self._event(sse, rid):
                            return
                        await self._inbox.room()
                failures = 0  # it ended again, after some events: resume from the newest
            except httpx2.HTTPError:
                log.debug("mcp response stream could not be resumed", exc_info=True)
                failures += 1
        self._fail(rid, "SSE stream ended and reconnection attempts were exhausted")

    def _event(self, sse: httpx2.ServerSentEvent, rid: RequestId | None) -> bool:
        """Deliver one SSE event's message; True if it is the answer to ``rid``."""
        if sse.event != "message" or not sse.data:  # a priming event (an id, no data), or unknown
            return False
        try:
            message = jsonrpc_message_adapter.validate_json(sse.data, by_name=False)
        except ValidationError as exc:
            if rid is None:
                self._deliver_error(exc)
                return False
            self._fail(rid, f"Failed to parse SSE message: {exc}", PARSE_ERROR)
            return True
        if rid is None or not isinstance(message, JSONRPCResponse | JSONRPCError):
            self._deliver(message)  # a request or notification of the server's (an elicitation)
            return False
        message.id = rid  # (a resumed stream may name the request as the server knew it)
        self._deliver(message)
        return True

    # ------------------------------------------------------------------ the standalone GET stream

    def _open_get_stream(self) -> None:
        if self.session_id is not None and self._get_task is None and not self._writer.closed:
            self._get_task = asyncio.create_task(self._listen(), name=f"mcp GET stream {self.url}")

    async def _listen(self) -> None:
        """What the server sends outside a call; reopened when it ends, up to a bound of failures."""
        last_id, retry_ms, failures = None, None, 0
        while failures < MAX_RECONNECTS:
            headers = self._headers()
            if last_id is not None:
                headers[LAST_EVENT_ID] = last_id
            try:
                async with sse_within_origin(
                    self.client, self.url, headers=headers, max_event_size=MAX_MESSAGE_BYTES
                ) as events:
                    if redirect_location(events.response) is not None:
                        return  # the same GET would be redirected again
                    events.response.raise_for_status()
                    async for sse in events:
                        last_id = sse.id or last_id
                        retry_ms = sse.retry if sse.retry is not None else retry_ms
                        self._event(sse, None)
                        await self._inbox.room()
                failures = 0
            except Exception:
                log.debug("mcp GET stream failed", exc_info=True)
                failures += 1
                if failures >= MAX_RECONNECTS:
                    return
            await asyncio.sleep(retry_ms / 1000 if retry_ms is not None else RECONNECT_DELAY_S)

    # ------------------------------------------------------------------ the read stream

    def _deliver(self, message: JSONRPCMessage) -> None:
        self._put(SessionMessage(message))

    def _deliver_error(self, exc: Exception) -> None:
        self._put(exc)

    def _fail(self, rid: RequestId, why: str, code: int = CONNECTION_CLOSED) -> None:
        """Resolve request ``rid`` with an error: its answer can never come."""
        self._deliver(JSONRPCError(jsonrpc="2.0", id=rid, error=ErrorData(code=code, message=why)))

    def _put(self, item: Inbound) -> None:
        if not self._inbox.put(item):  # the session is being left
            log.debug("mcp message after the session's end dropped")

    async def _delete(self) -> None:
        with contextlib.suppress(Exception), anyio.move_on_after(DELETE_TIMEOUT_S):
            response = await request_within_origin(self.client, "DELETE", self.url, headers=self._headers())
            if response.status_code not in (200, 204, 405):
                log.debug("mcp session not deleted: HTTP %s", response.status_code)


class _Inbox:
    """The read end of the pair: what the server sent, in order, for the session's reading task.

    A deque and the reader's future: an anyio memory stream would do, but its ``receive`` takes
    an extra turn of the event loop on every message even when one is waiting."""

    def __init__(self) -> None:
        self._items: collections.deque[Inbound] = collections.deque()
        self._reader: asyncio.Future[None] | None = None
        self._writers: list[asyncio.Future[None]] = []  # streams waiting for room
        self._ended = False  # no more will come (the transport was left)
        self._closed = False  # the reader is gone

    async def room(self) -> None:
        """Wait while ``MAX_BACKLOG`` messages are unread: a server's stream is read no faster
        than the session takes its messages."""
        while len(self._items) >= MAX_BACKLOG and not self._closed:
            waiter = asyncio.get_running_loop().create_future()
            self._writers.append(waiter)
            await waiter

    def put(self, item: Inbound) -> bool:
        """Queue ``item``; False if nobody will read it."""
        if self._ended or self._closed:
            return False
        self._items.append(item)
        self._wake()
        return True

    def end(self) -> None:
        self._ended = True
        self._wake()

    def _wake(self) -> None:
        reader, self._reader = self._reader, None
        if reader is not None and not reader.done():
            reader.set_result(None)

    async def receive(self) -> Inbound:
        while not self._items:
            if self._closed:
                raise anyio.ClosedResourceError
            if self._ended:
                raise anyio.EndOfStream
            self._reader = asyncio.get_running_loop().create_future()
            await self._reader
        item = self._items.popleft()
        if self._writers and len(self._items) < MAX_BACKLOG:
            self._release()
        return item

    def _release(self) -> None:
        writers, self._writers = self._writers, []
        for waiter in writers:
            if not waiter.done():
                waiter.set_result(None)

    def __aiter__(self) -> _Inbox:
        return self

    async def __anext__(self) -> Inbound:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        self._closed = True
        self._items.clear()
        self._wake()
        self._release()

    async def __aenter__(self) -> _Inbox:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


class _Writer:
    """The write end of the pair: ``send`` is the transport's own, in the writer's task."""

    def __init__(self, transport: HttpTransport) -> None:
        self._transport = transport
        self.closed = False

    async def send(self, item: SessionMessage, /) -> None:
        if self.closed:
            raise anyio.ClosedResourceError
        await self._transport.send(item)

    async def aclose(self) -> None:
        self.closed = True

    async def __aenter__(self) -> _Writer:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.closed = True


class KeepAlive(httpx2.AsyncBaseTransport):
    """The HTTP transport of a session: httpx's pool, with response streams drained at close.

    A call's SSE response is closed as soon as its result has been read (by this module's
    transport and by the SDK's), before the server's end of stream; a connection with unread body
    cannot be reused, so every call would open a new TCP connection. Reading the little that is
    left (the server ends the stream right after the result) returns the connection to the pool
    instead."""

    def __init__(self) -> None:
        limits = httpx2.Limits(
            max_connections=MAX_CONNECTIONS_PER_SESSION,
            max_keepalive_connections=MAX_CONNECTIONS_PER_SESSION,
            keepalive_expiry=KEEPALIVE_S,
        )
        self._inner = httpx2.AsyncHTTPTransport(limits=limits)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        # every body, not only a stream's: a 202 or an error's body is not read otherwise either
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        response.stream = Drained(response.stream)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


class Drained(httpx2.AsyncByteStream):
    """A response body whose unread rest is read (bounded) before it is closed."""

    def __init__(self, inner: httpx2.AsyncByteStream) -> None:
        self._inner = inner
        self._parts = aiter(inner)
        self._ended = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        # a loop of our own, not ``async for``: the reader stopping early must leave ``_parts``
        # open for ``aclose`` to finish
        while True:
            try:
                part = await anext(self._parts)
            except StopAsyncIteration:
                self._ended = True
                return
            yield part

    def discard(self) -> None:
        """Close without reading the rest: the connection is not kept."""
        self._ended = True

    async def aclose(self) -> None:
        try:
            if not self._ended:
                await self._drain()
        finally:
            await self._inner.aclose()

    async def _drain(self) -> None:
        seen = 0
        with contextlib.suppress(Exception), anyio.move_on_after(DRAIN_S):
            while seen <= DRAIN_MAX_BYTES:
                try:
                    seen += len(await anext(self._parts))
                except StopAsyncIteration:
                    self._ended = True
                    return
