"""``GET /metrics`` (and ``/``): the Prometheus exposition of the daemon's registry.

Rendered on the daemon's loop, where the engine's runtimes, buses and tallies change, so a scrape
sees one consistent state without locks (prometheus-client's own server would read them from a
thread).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def routes(registry: CollectorRegistry) -> list[BaseRoute]:
    async def metrics(request: Request) -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE)

    return [Route("/metrics", metrics, methods=["GET"]), Route("/", metrics, methods=["GET"])]
