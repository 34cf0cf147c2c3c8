"""Optional bearer-token authentication of every AgentRuntime and reflection call (DESIGN §7).

When the daemon is started with a token, a call must carry
``authorization: Bearer <token>`` or it ends UNAUTHENTICATED before reaching
the servicer. Health checks stay open so orchestrators can probe without the
secret. The token is compared in constant time and never logged.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
from grpc import aio

OPEN_PREFIXES = ("/grpc.health.v1.Health/",)
UNAUTHENTICATED = "missing or wrong bearer token: send metadata authorization: Bearer <token>"


class BearerTokenInterceptor(aio.ServerInterceptor):  # type: ignore[misc]  # grpc is untyped
    def __init__(self, token: str) -> None:
        self._expected = f"Bearer {token}".encode()

    async def intercept_service(self, continuation: Callable[[Any], Awaitable[Any]],
                                details: grpc.HandlerCallDetails) -> Any:
        handler = await continuation(details)
        if handler is None or str(details.method).startswith(OPEN_PREFIXES) or self._allowed(details):
            return handler
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
