"""The answer links' HTTP side: any request to the listener, handed to ``answers.routes``.

One catch-all route (links may sit under a path of ``--answers-base-url``), every method (the
routes say 405 themselves, with their own body). The body is read here, bounded: past
``MAX_BODY_BYTES`` the answer is 413 before more of it is read (checked against
``Content-Length`` first, then counted as it arrives).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from starlette.types import Receive, Scope, Send

from ..answers.routes import HttpRequest, HttpResponse

# a JSON answer or a form: the answer's data is bounded again by --max-pending-data-bytes
MAX_BODY_BYTES = 64 * 1024
_TOO_LARGE = b'{"error":"the body is too large"}'


Handler = Callable[[HttpRequest], Awaitable[HttpResponse]]


class _TooLarge(Exception):
    pass


def routes(handler: Handler, max_body: int = MAX_BODY_BYTES) -> list[BaseRoute]:
    return [Route("/{path:path}", _AnswerLinks(handler, max_body))]


class _AnswerLinks:
    """An ASGI app rather than a function endpoint, so the route takes every method."""

    def __init__(self, handler: Handler, max_body: int) -> None:
        self._handler = handler
        self._max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = await self._answer(Request(scope, receive))
        await response(scope, receive, send)

    async def _answer(self, request: Request) -> Response:
        try:
            body = await _body(request, self._max_body)
        except _TooLarge:
            return Response(_TOO_LARGE, 413, {"Connection": "close"}, media_type="application/json")
        except ClientDisconnect:
            return Response(status_code=400)  # nobody is left to read it
        http = HttpRequest(request.method.upper(), _target(request), _headers(request), body)
        reply = await self._handler(http)
        return Response(reply.body, reply.status, reply.headers, media_type=reply.content_type)


async def _body(request: Request, limit: int) -> bytes:
    length = request.headers.get("content-length", "")
    if length.isdigit() and int(length) > limit:
        raise _TooLarge
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise _TooLarge
    return bytes(body)


def _target(request: Request) -> str:
    """The path and query as sent (percent-encoding kept: a token is matched as it was minted)."""
    path: bytes = request.scope.get("raw_path") or request.scope["path"].encode()
    query: bytes = request.scope.get("query_string", b"")
    return (path + (b"?" + query if query else b"")).decode("ascii", "replace")


def _headers(request: Request) -> dict[str, str]:
    """Lower-case names; a repeated header keeps its last value."""
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in request.scope["headers"]}
