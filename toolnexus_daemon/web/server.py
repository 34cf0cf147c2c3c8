"""One HTTP listener: a Starlette app served by uvicorn's HTTP/1.1 protocol on the daemon's loop.

uvicorn's ``Server.serve`` would install its own SIGINT/SIGTERM handlers, exit the process when
the port is taken and tick a timer ten times a second; the daemon needs none of that, so this
uses uvicorn one level down: its ``Config`` (loaded once) and its h11 protocol — here
:class:`~.limits.GuardedH11` — handed to ``loop.create_server``. No thread, no extra process;
the app's endpoints run on the loop the engine runs on, so they call it without locks.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from typing import Any

from starlette.types import ASGIApp
from uvicorn import Config
from uvicorn.server import ServerState

from .limits import Gate, GuardedH11, HeadLimit, Limits

# how long close() lets a request being answered finish before cancelling it
CLOSE_GRACE_S = 2.0

# uvicorn says "Invalid HTTP request received." at WARNING for every bad request: a flood of
# garbage would flood the log; errors in endpoints are still logged
logging.getLogger("uvicorn.error").setLevel(logging.ERROR)


class WebListenError(Exception):
    """The listener's address could not be bound."""


class WebServer:
    """Serves ``app`` on one ``host:port``, over TLS when given a context, under ``limits``."""

    def __init__(self, app: ASGIApp, what: str, *, limits: Limits | None = None,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        self._limits = limits or Limits()
        self._what = what  # "answer links", "metrics": for the bind error
        self._ssl = ssl_context
        guarded = HeadLimit(app, self._limits.max_head_bytes)
        self._config = Config(guarded, lifespan="off", ws="none", http=GuardedH11, interface="asgi3",
                              log_config=None, access_log=False, proxy_headers=False,
                              server_header=False, date_header=False,
                              timeout_keep_alive=self._limits.keep_alive_s,
                              h11_max_incomplete_event_size=self._limits.max_head_bytes)
        self._config.load()
        self._state = ServerState()
        self.gate = Gate(self._limits)
        self._server: asyncio.Server | None = None

    async def start(self, address: str) -> str:
        """Listen on ``host:port``; returns it with the port resolved (IPv6 hosts in brackets)."""
        host, _, port = address.rpartition(":")
        host = host.strip("[]")
        try:
            self._server = await asyncio.get_running_loop().create_server(
                self._protocol, host, int(port), ssl=self._ssl,
                ssl_handshake_timeout=self._limits.request_s if self._ssl else None, backlog=512)
        except OSError as exc:
            raise WebListenError(f"cannot serve {self._what} on {address}: {exc.strerror}") from exc
        bound = self._server.sockets[0].getsockname()[1]
        return f"{'[' + host + ']' if ':' in host else host}:{bound}"

    async def close(self) -> None:
        """Stop accepting, close idle connections, give requests being answered a moment."""
        if self._server is None:
            return
        self._server.close()
        for conn in list(self._state.connections):
            with contextlib.suppress(Exception):  # a connection in a broken state is closed below
                conn.shutdown()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(CLOSE_GRACE_S):
                while self._state.tasks:
                    await asyncio.sleep(0.05)
        for task in list(self._state.tasks):
            task.cancel()
        for conn in list(self._state.connections):
            conn.transport.close()
        await self._server.wait_closed()

    def _protocol(self) -> GuardedH11:
        return GuardedH11(config=self._config, server_state=self._state, app_state=_no_state(),
                          gate=self.gate)


def _no_state() -> dict[str, Any]:
    return {}
