"""Client sessions to MCP servers, kept per server and reused across calls and runtimes
(docs/mcp.md).

A session is one connected ``mcp.Client`` (the official SDK: no JSON-RPC is written here), run
in a task of its own because the SDK's client is an anyio context that must be entered and
left by the same task. A session carries at most one ``tools/call`` at a time: the SDK hands an
``elicitation/create`` to the client without saying which call asked, so a session with one
call in flight is how an elicitation is known to belong to that call. Idle sessions wait in a
pool for the next call (of any runtime); a session whose connection dropped is dropped, and the
next call connects anew. The daemon connects with the initialize handshake (protocol
2025-11-25), where an elicitation arrives on the open call. Over HTTP the client runs on the
daemon's own streamable-HTTP transport (``mcp_http``), which sends each message from the task
that writes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.session import ClientRequestContext, IncomingMessage
from mcp.client.streamable_http import streamable_http_client
from mcp_types import (
    INVALID_REQUEST,
    CallToolResult,
    ElicitRequestParams,
    ElicitResult,
    ErrorData,
    Implementation,
    InputRequiredResult,
    InputResponses,
    RequestParamsMeta,
    Tool,
    ToolListChangedNotification,
)

from .. import __version__
from .mcp_http import HttpTransport, KeepAlive

log = logging.getLogger("toolnexus_daemon.tools.mcp")

# how long connecting (and the handshake) may take before the server counts as unreachable
CONNECT_TIMEOUT_S = 10.0
# sessions one server may have open at once (each carries one call); a call past it waits
MAX_SESSIONS_PER_SERVER = 16
# a listing longer than this is refused (a paginator that never ends cannot hang New)
MAX_LIST_PAGES = 100
# leaving a session (its transport's DELETE, a stdio server's exit) must not hang the daemon
CLOSE_TIMEOUT_S = 5.0

# the SDK's own streamable-HTTP transport instead of the daemon's (``mcp_http``): a comparison for
# bench/mcp_call.py (--sdk-transport), not a setting
SDK_HTTP_TRANSPORT = False

ElicitHandler = Callable[[ElicitRequestParams], Awaitable[ElicitResult]]


@dataclass(frozen=True)
class Endpoint:
    """How to reach one server: a streamable-HTTP URL with headers, or a stdio command."""

    url: str = ""
    headers: tuple[tuple[str, str], ...] = ()
    command: str = ""
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    # the SDK's connect mode: "legacy" (the initialize handshake) or "auto" (2026-07-28 if spoken)
    mode: str = "legacy"

    def describe(self) -> str:
        return self.url or f"stdio command {self.command}"


class Unreachable(Exception):
    """The server could not be connected to (or its handshake failed)."""


class InvalidResult(Exception):
    """The server answered, but its result does not match the tool's declared output schema (the
    SDK checks it): the call is over, its outcome known, the session sound."""


# how the pinned SDK words its output-schema check (``ClientSession.validate_tool_result``); it
# raises a plain RuntimeError, so the words are what tells it from a broken session
_SCHEMA_CHECK = ("Invalid structured content returned by tool ", "Invalid schema for tool ")


def _schema_check_failed(exc: RuntimeError, name: str) -> bool:
    text = str(exc)
    missing = f"Tool {name} has an output schema but did not return structured content"
    return text.startswith(_SCHEMA_CHECK) or text == missing


class Session:
    """One connected client in its own task; ``on_elicit`` is set by the call it carries."""

    def __init__(self, endpoint: Endpoint, on_change: Callable[[], None]) -> None:
        self.endpoint = endpoint
        self.client: Client | None = None
        self.on_elicit: ElicitHandler | None = None
        self._on_change = on_change
        self._ready: asyncio.Future[None] | None = None
        self._closing = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.alive = False
        # the server said it no longer knows this session (HTTP 404 to a request carrying its id):
        # the request was refused unread, so the call can be made on a new session
        self.expired = False

    async def open(self) -> None:
        """Connect; ``Unreachable`` naming why not."""
        self._ready = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._run(), name=f"mcp session {self.endpoint.describe()}")
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT_S):
                await asyncio.shield(self._ready)
        except TimeoutError:
            self.close()
            raise Unreachable(f"no handshake within {CONNECT_TIMEOUT_S:g} s") from None
        except Exception as exc:
            raise Unreachable(_reason(exc)) from exc
        self.alive = True

    async def _run(self) -> None:
        assert self._ready is not None
        http: httpx2.AsyncClient | None = None
        try:
            if self.endpoint.url:
                http = httpx2.AsyncClient(
                    headers=dict(self.endpoint.headers),
                    timeout=httpx2.Timeout(30.0, read=300.0),
                    event_hooks={"response": [self._response]},
                    transport=KeepAlive(),
                )
                server: Any = (
                    HttpTransport(self.endpoint.url, http)
                    if not SDK_HTTP_TRANSPORT
                    else streamable_http_client(self.endpoint.url, http_client=http)
                )
            else:
                server = StdioServerParameters(
                    command=self.endpoint.command,
                    args=list(self.endpoint.args),
                    env=dict(self.endpoint.env) or None,
                )
            # sampling is not declared, so the SDK refuses a sampling/createMessage with an MCP error
            async with Client(
                server,
                mode=self.endpoint.mode,
                cache=None,
                elicitation_callback=self._elicit,
                message_handler=self._message,
                client_info=Implementation(name="toolnexus-daemon", version=__version__),
            ) as client:
                self.client = client
                self._ready.set_result(None)
                await self._closing.wait()
        except BaseException as exc:  # the transport died, or the handshake failed: tell open() or the call
            if not self._ready.done():
                self._ready.set_exception(exc if isinstance(exc, Exception) else Unreachable("cancelled"))
            elif not isinstance(exc, asyncio.CancelledError):
                log.info(
                    "mcp session ended", extra={"server": self.endpoint.describe(), "error": _reason(exc)}
                )
        finally:
            self.alive = False
            self.client = None
            if http is not None:
                with contextlib.suppress(Exception):
                    await http.aclose()

    async def _response(self, response: httpx2.Response) -> None:
        # the SDK reports this 404 as an MCP error without the status; the specification says the
        # client must start a new session then, which the executor does with this mark
        if response.status_code == 404 and "mcp-session-id" in response.request.headers:
            self.expired = True
            self.alive = False

    async def _elicit(
        self, context: ClientRequestContext, params: ElicitRequestParams
    ) -> ElicitResult | ErrorData:
        handler = self.on_elicit
        if handler is None:  # nothing of ours is in flight here: nobody could answer
            return ErrorData(
                code=INVALID_REQUEST,
                message="toolnexus-daemon: no tools/call in flight on this session to elicit for",
            )
        return await handler(params)

    async def _message(self, message: IncomingMessage) -> None:
        if isinstance(message, ToolListChangedNotification):
            self._on_change()

    async def call(
        self,
        name: str,
        arguments: Mapping[str, Any],
        meta: Mapping[str, Any],
        responses: InputResponses | None = None,
        state: str | None = None,
    ) -> CallToolResult | InputRequiredResult:
        """One ``tools/call`` round; on the 2026-07-28 protocol the server may answer that it needs
        input first (``InputRequiredResult``): the caller retries with the responses and its state."""
        client = self.client
        if client is None:
            raise Unreachable("the session is closed")
        try:
            return await client.session.call_tool(
                name,
                dict(arguments),
                meta=cast(RequestParamsMeta, meta),
                input_responses=responses,
                request_state=state,
                allow_input_required=True,
            )
        except RuntimeError as exc:
            if _schema_check_failed(exc, name):
                raise InvalidResult(str(exc)) from exc
            raise

    async def list_tools(self) -> list[Tool]:
        """Every tool, page by page (``tools/list``)."""
        client = self.client
        if client is None:
            raise Unreachable("the session is closed")
        tools: list[Tool] = []
        cursor: str | None = None
        for _ in range(MAX_LIST_PAGES):
            page = await client.list_tools(cursor=cursor, cache_mode="bypass")
            tools += page.tools
            cursor = page.next_cursor
            if cursor is None:
                return tools
        raise Unreachable(f"tools/list gave more than {MAX_LIST_PAGES} pages")

    def close(self) -> None:
        """Leave the session (in the background, bounded)."""
        self.alive = False
        self._closing.set()
        task = self._task
        if task is not None and not task.done():
            asyncio.get_running_loop().call_later(CLOSE_TIMEOUT_S, task.cancel)

    async def aclose(self) -> None:
        self.close()
        if self._task is not None:
            with contextlib.suppress(BaseException):
                async with asyncio.timeout(CLOSE_TIMEOUT_S + 1):
                    await self._task


@dataclass
class _Pool:
    idle: list[Session] = field(default_factory=list)
    count: int = 0
    # calls waiting for a session (the pool is full): each is woken by a session given back or forgotten
    waiting: list[asyncio.Future[None]] = field(default_factory=list)

    def take(self) -> Session | None:
        """An idle live session, or a place for a new one (``None``; counted), or ``NoRoom``."""
        while self.idle:
            session = self.idle.pop()
            if session.alive:
                return session
            self.count -= 1
        if self.count < MAX_SESSIONS_PER_SERVER:
            self.count += 1
            return None
        raise NoRoom

    def wake_one(self) -> None:
        while self.waiting:
            waiter = self.waiting.pop(0)
            if not waiter.done():
                waiter.set_result(None)
                return


class NoRoom(Exception):
    """Every session the server may have is carrying a call."""


class Sessions:
    """The daemon's sessions by endpoint; ``on_change(endpoint)`` hears ``tools/list_changed``.

    The pool is only touched between awaits (one event loop), so taking and giving back need no
    lock: the common case, an idle session there, costs no wait at all."""

    def __init__(self, on_change: Callable[[Endpoint], None] | None = None) -> None:
        self._pools: dict[Endpoint, _Pool] = {}
        self._on_change = on_change or (lambda _e: None)

    async def acquire(self, endpoint: Endpoint, wait_s: float) -> Session:
        """An idle live session of ``endpoint``, or a new one; ``Unreachable`` if none can be had
        (``TimeoutError`` when the pool stayed full for ``wait_s``)."""
        pool = self._pools.get(endpoint)
        if pool is None:
            pool = self._pools[endpoint] = _Pool()
        try:
            session = pool.take()
        except NoRoom:
            session = await self._wait(pool, wait_s)
        if session is not None:
            return session
        session = Session(endpoint, lambda: self._on_change(endpoint))
        try:
            await session.open()
        except BaseException:
            self._forget(pool)
            raise
        return session

    @staticmethod
    async def _wait(pool: _Pool, wait_s: float) -> Session | None:
        async with asyncio.timeout(wait_s):
            while True:
                waiter = asyncio.get_running_loop().create_future()
                pool.waiting.append(waiter)
                try:
                    await waiter
                except BaseException:
                    if waiter.done() and not waiter.cancelled():
                        pool.wake_one()  # woken, but leaving: the next waiter has the turn
                    with contextlib.suppress(ValueError):
                        pool.waiting.remove(waiter)
                    raise
                try:
                    return pool.take()
                except NoRoom:
                    continue

    async def release(self, session: Session, *, keep: bool) -> None:
        """Give a session back after its call: kept for the next one, or closed (``keep=False``, or
        its connection is gone)."""
        session.on_elicit = None
        pool = self._pools.get(session.endpoint)
        if pool is None:
            pool = self._pools[session.endpoint] = _Pool()
        if keep and session.alive:
            pool.idle.append(session)
            pool.wake_one()
            return
        session.close()
        self._forget(pool)

    @staticmethod
    def _forget(pool: _Pool) -> None:
        pool.count -= 1
        pool.wake_one()

    async def aclose(self) -> None:
        sessions = [s for pool in self._pools.values() for s in pool.idle]
        self._pools.clear()
        await asyncio.gather(*(s.aclose() for s in sessions))


def _reason(exc: BaseException) -> str:
    """A one-line reason, unwrapping the exception groups anyio raises."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


reason = _reason
