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
from typing import Any

import grpc
from grpc import aio

OPEN_PREFIXES = ("/grpc.health.v1.Health/",)
REFLECTION_PREFIXES = ("/grpc.reflection.v1alpha.ServerReflection/", "/grpc.reflection.v1.ServerReflection/")
UNAUTHENTICATED = "missing or wrong bearer token: send metadata authorization: Bearer <token>"

log = logging.getLogger("toolnexus_daemon.access")


class BearerTokenInterceptor(aio.ServerInterceptor):  # type: ignore[misc]  # grpc is untyped
    def __init__(self, token: str, *, reflection_open: bool = False) -> None:
        self._expected = f"Bearer {token}".encode()
        self._open = OPEN_PREFIXES + (REFLECTION_PREFIXES if reflection_open else ())

    async def intercept_service(self, continuation: Callable[[Any], Awaitable[Any]],
                                details: grpc.HandlerCallDetails) -> Any:
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


def _refusing(handler: Any) -> Any:
    """A handler of the same shape as ``handler`` that aborts UNAUTHENTICATED."""

    async def abort(_request: Any, context: aio.ServicerContext[Any, Any]) -> None:
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, UNAUTHENTICATED)

    serde = {"request_deserializer": handler.request_deserializer,
             "response_serializer": handler.response_serializer}
    if handler.unary_unary:
        return grpc.unary_unary_rpc_method_handler(abort, **serde)
    if handler.unary_stream:
        return grpc.unary_stream_rpc_method_handler(abort, **serde)
    if handler.stream_unary:
        return grpc.stream_unary_rpc_method_handler(abort, **serde)
    return grpc.stream_stream_rpc_method_handler(abort, **serde)
