"""``GET /healthz``: the daemon's own health, as gRPC health reports it, for HTTP probes.

200 ``{"status": "SERVING"}`` once the daemon serves; 503 ``{"status": "NOT_SERVING"}`` while it
starts, while its database cannot be reached, and while it shuts down.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

Serving = Callable[[], Awaitable[bool]]


def routes(serving: Serving) -> list[BaseRoute]:
    async def healthz(request: Request) -> Response:
        up = await serving()
        return JSONResponse({"status": "SERVING" if up else "NOT_SERVING"}, status_code=200 if up else 503,
                            headers={"Cache-Control": "no-store"})

    return [Route("/healthz", healthz, methods=["GET"])]
