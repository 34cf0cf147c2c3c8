"""The metrics listener's routes, served by the real web edge on loopback: ``/healthz`` follows
what it is told, ``/metrics`` renders the registry, other paths and methods are refused."""

from __future__ import annotations

import httpx
from prometheus_client import CollectorRegistry, Counter

from toolnexus_daemon.web import metrics_server


async def test_health_says_not_serving_with_503_and_metrics_render_the_registry() -> None:
    registry = CollectorRegistry()
    Counter("probe_things", "things", registry=registry).inc()
    up = False

    async def serving() -> bool:
        return up

    server = metrics_server(registry, serving)
    address = await server.start("127.0.0.1:0")
    try:
        async with httpx.AsyncClient(base_url=f"http://{address}", timeout=5) as http:
            down = await http.get("/healthz")
            assert (down.status_code, down.json()) == (503, {"status": "NOT_SERVING"})
            up = True
            assert (await http.get("/healthz")).json() == {"status": "SERVING"}
            scraped = await http.get("/metrics")
            assert scraped.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
            assert "probe_things_total 1.0" in scraped.text
            assert (await http.head("/metrics")).content == b""
            assert (await http.get("/nope")).status_code == 404
            assert (await http.post("/metrics")).status_code == 405
    finally:
        await server.close()
