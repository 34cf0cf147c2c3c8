"""Optional bearer-token authentication of every AgentRuntime and reflection call (docs/protocol.md §7).

When the daemon is started with a token, a call must carry
``authorization: Bearer <token>`` or it ends UNAUTHENTICATED before reaching
the servicer. Health checks stay open so orchestrators can probe without the
secret, and so does reflection with ``--reflection-open`` (it describes the
public schema, never data). The token is compared in constant time and never
logged; a refusal is logged with the method only.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Awaitable, Callable
from typing import TypeAlias, TypeVar

import grpc
from grpc import aio

OPEN_PREFIXES = ("/grpc.health.v1.Health/",)
REFLECTION_PREFIXES = ("/grpc.reflection.v1alpha.ServerReflection/", "/grpc.reflection.v1.ServerReflection/")
UNAUTHENTICATED = "missing or wrong bearer token: send metadata authorization: Bearer <token>"

log = logging.getLogger("toolnexus_daemon.access")
Req = TypeVar("Req")  # whatever the intercepted method takes and answers
Resp = TypeVar("Resp")
# (strings: grpc's RpcMethodHandler is generic only in its type stubs)
Handler: TypeAlias = "grpc.RpcMethodHandler[Req, Resp]"
# what an interceptor is given: the handler the server found for a call (None: no such method)
Continuation: TypeAlias = "Callable[[grpc.HandlerCallDetails], Awaitable[Handler[Req, Resp] | None]]"


class BearerTokenInterceptor(aio.ServerInterceptor):
    def __init__(self, token: str, *, reflection_open: bool = False) -> None:
        self._expected = f"Bearer {token}".encode()
        self._open = OPEN_PREFIXES + (REFLECTION_PREFIXES if reflection_open else ())

    async def intercept_service(self, continuation: Continuation[Req, Resp],
                                details: grpc.HandlerCallDetails) -> Handler[Req, Resp] | None:
        handler = await continuation(details)
        if handler is None or str(details.method).startswith(self._open) or self._allowed(details):
            return handler
        log.info("rpc", extra={"method": str(details.method).rpartition("/")[2], "code": "UNAUTHENTICATED"})
        return _refusing(handler)

    def _allowed(self, details: grpc.HandlerCallDetails) -> bool:
        for key, value in details.invocation_metadata or ():
            if key == "authorization":
                presented = value.encode() if isinstance(value, str) else bytes(value)
                return hmac.compare_digest(presented, self._expected)
        return False


def _refusing(handler: Handler[Req, Resp]) -> Handler[Req, Resp]:
    """A handler of the same shape as ``handler`` that aborts UNAUTHENTICATED."""

    async def abort(_request: object, context: aio.ServicerContext[Req, Resp]) -> None:
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, UNAUTHENTICATED)

    decode, encode = handler.request_deserializer, handler.response_serializer
    if handler.unary_unary:
        make = grpc.unary_unary_rpc_method_handler
    elif handler.unary_stream:
        make = grpc.unary_stream_rpc_method_handler
    elif handler.stream_unary:
        make = grpc.stream_unary_rpc_method_handler
    else:
        make = grpc.stream_stream_rpc_method_handler
    return make(abort, request_deserializer=decode, response_serializer=encode)
