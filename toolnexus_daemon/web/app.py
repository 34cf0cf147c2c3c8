"""The Starlette apps of the daemon's HTTP listeners, composed from the route modules.

``--metrics-listen`` serves ``metrics`` and ``health``; ``--answers-listen`` serves ``answers``
(kept apart: the answers port may face the internet, the metrics port should not);
``--ui-listen`` serves the web inspector. Each is a
:class:`~.server.WebServer` with the limits of :mod:`.limits`.
"""

from __future__ import annotations

import ssl
from collections.abc import Sequence

from prometheus_client import CollectorRegistry
from starlette.applications import Starlette
from starlette.routing import BaseRoute

from ..answers.links import ForwardAnswer, Links
from ..answers.routes import Routes
from ..bounds import PeerLimits
from ..clock import Clock
from ..config import Settings
from ..config_answers import base_url
from ..config_listen import is_loopback
from ..engine.verbs.engine import Engine
from . import answers, health, metrics
from .inspector import ForwardResume, Inspector
from .server import WebListenError, WebServer


def build(*groups: Sequence[BaseRoute]) -> Starlette:
    """One app serving the routes of ``groups``, in order."""
    return Starlette(routes=[route for group in groups for route in group])


def metrics_server(registry: CollectorRegistry, serving: health.Serving) -> WebServer:
    """The ``--metrics-listen`` listener (not yet bound): ``/metrics``, ``/`` and ``/healthz``."""
    return WebServer(build(health.routes(serving), metrics.routes(registry)), "metrics")


async def serve_answers(settings: Settings, engine: Engine, clock: Clock, limits: PeerLimits,
                        forward: ForwardAnswer | None = None) -> tuple[WebServer, str]:
    """Bind the listener of ``settings.answers`` and point the engine's links at it; returns the
    server and the address it bound (port resolved). In a cluster ``forward`` sends an answer
    for a runtime another daemon owns to that daemon."""
    assert settings.answers is not None
    app = build(answers.routes(Routes(Links(engine, clock, forward), limits)))
    server = WebServer(app, "answer links", ssl_context=_ssl(settings))
    bound = await server.start(settings.answers.listen)
    engine.answer_base = base_url(settings.answers, bound, settings.tls is not None)
    return server, bound


async def serve_ui(settings: Settings, engine: Engine, clock: Clock,
                   forward: ForwardResume | None = None) -> tuple[WebServer, str]:
    """Bind the web inspector's listener (``settings.ui_listen``); returns the server and the
    address it bound. In a cluster ``forward`` sends an answer for a runtime another daemon owns
    to that daemon."""
    inspector = Inspector(engine, clock, settings.auth_token, secure=settings.tls is not None,
                          forward=forward)
    server = WebServer(build(inspector.routes()), "the inspector", ssl_context=_ssl(settings))
    bound = await server.start(settings.ui_listen)
    inspector.bound(bound, is_loopback(bound.rpartition(":")[0].strip("[]")))
    return server, bound


def _ssl(settings: Settings) -> ssl.SSLContext | None:
    """The daemon's certificate, without asking for a client one (a phone has none)."""
    if settings.tls is None:
        return None
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        ctx.load_cert_chain(settings.tls.cert, settings.tls.key)
    except (OSError, ssl.SSLError) as exc:
        raise WebListenError(f"cannot load --tls-cert/--tls-key for the HTTP listeners: {exc}") from exc
    return ctx
