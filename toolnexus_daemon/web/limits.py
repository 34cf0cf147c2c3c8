"""What one HTTP connection may hold, and for how long: the limits uvicorn's h11 protocol lacks.

uvicorn bounds the head (h11's ``max_incomplete_event_size``) and the idle time *after* a
response (``timeout_keep_alive``), and has one global ``limit_concurrency`` that answers 503 to
every newcomer once the connections are many — so idle sockets *would* lock people out. Added
here, on uvicorn's own ``H11Protocol``:

* a **request deadline**: a connection must deliver a whole request (head and body) within
  ``request_s`` of opening (or of its previous response); one that sends nothing, or half a
  request line, or trickles its body, is closed when it passes;
* a **head limit** that holds however the head arrives: h11 refuses an *incomplete* head past
  its bound, but parses a complete one of any size that came in one read; :class:`HeadLimit`
  answers those 400 before the app sees them;
* a **per-peer cap** and a **global cap** on connections. At a cap, a newcomer is not refused:
  the oldest connection of that peer (or of all) that is *not being answered* — idle, or still
  sending its request — is closed to make room, so a flood of idle sockets only evicts itself.
  Only when every connection is busy being answered is the newcomer closed.

The peer is the TCP peer address (no proxy headers are trusted for it).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol


@dataclass(frozen=True)
class Limits:
    """The bounds of one listener (docs/operations.md lists the defaults)."""

    # a whole request — head and body — must arrive within this of connecting or of the last reply
    request_s: float = 5.0
    # an idle keep-alive connection is closed after this (uvicorn's timeout_keep_alive)
    keep_alive_s: int = 5
    # the request line and headers together (h11's max_incomplete_event_size)
    max_head_bytes: int = 16 * 1024
    # connections open at once from one peer address, and in all
    per_peer: int = 32
    total: int = 512


class HeadLimit:
    """Answers 400 to a request whose request line and headers exceed ``max_bytes``."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self._app = app
        self._max = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and _head_size(scope) > self._max:
            body = b"the request's headers are too large"
            await send({"type": "http.response.start", "status": 400,
                        "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                                    (b"content-length", str(len(body)).encode()), (b"connection", b"close")]})
            await send({"type": "http.response.body", "body": body})
            return
        await self._app(scope, receive, send)


def _head_size(scope: Scope) -> int:
    line = len(scope.get("raw_path", b"")) + len(scope.get("query_string", b"")) + len(scope["method"])
    return line + sum(len(k) + len(v) + 4 for k, v in scope["headers"])


class Gate:
    """The open connections of one listener, oldest first, in all and by peer."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self._all: OrderedDict[GuardedH11, None] = OrderedDict()
        self._by_peer: dict[str, OrderedDict[GuardedH11, None]] = {}

    def __len__(self) -> int:
        return len(self._all)

    def admit(self, conn: GuardedH11, peer: str) -> bool:
        """Make room for ``conn`` (closing the oldest unbusy connection at a full cap); False when
        every connection in its way is busy being answered."""
        mine = self._by_peer.setdefault(peer, OrderedDict())
        if len(mine) >= self.limits.per_peer and not self._evict(mine):
            self._drop_peer_if_empty(peer)
            return False
        if len(self._all) >= self.limits.total and not self._evict(self._all):
            self._drop_peer_if_empty(peer)
            return False
        mine[conn] = None
        self._all[conn] = None
        return True

    def leave(self, conn: GuardedH11, peer: str) -> None:
        self._all.pop(conn, None)
        mine = self._by_peer.get(peer)
        if mine is not None:
            mine.pop(conn, None)
            self._drop_peer_if_empty(peer)

    def _evict(self, conns: OrderedDict[GuardedH11, None]) -> bool:
        victim = next((c for c in conns if not c.busy), None)
        if victim is None:
            return False
        victim.drop()
        return True

    def _drop_peer_if_empty(self, peer: str) -> None:
        if not self._by_peer.get(peer):
            self._by_peer.pop(peer, None)


class GuardedH11(H11Protocol):
    """uvicorn's HTTP/1.1 protocol under a :class:`Gate` and a request deadline."""

    def __init__(self, *args: Any, gate: Gate, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._gate = gate
        self._peer = ""
        self._admitted = False
        self._deadline: asyncio.TimerHandle | None = None

    @property
    def busy(self) -> bool:
        """A whole request is in and its answer not yet sent: the one state not evicted."""
        cycle = self.cycle
        return cycle is not None and not cycle.response_complete and not cycle.more_body

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._peer = self.client[0] if self.client else ""
        if not self._gate.admit(self, self._peer):
            self.drop()
            return
        self._admitted = True
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self._leave()
        super().connection_lost(exc)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm()  # the next request on this connection gets a deadline of its own

    def drop(self) -> None:
        """Close the connection now, answering nothing (the peer sees the close)."""
        self._disarm()
        self._leave()
        if not self.transport.is_closing():
            self.transport.close()

    def _leave(self) -> None:
        if self._admitted:
            self._admitted = False
            self._gate.leave(self, self._peer)

    def _arm(self) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(self._gate.limits.request_s, self._expire)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expire(self) -> None:
        self._deadline = None
        if not self.busy:  # no whole request arrived in time (one being answered is the app's)
            self.drop()
