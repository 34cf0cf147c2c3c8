"""Answer links (docs/protocol.md §10): the HTTP(S) listener people answer suspensions through.

``http`` serves HTTP/1.1 on the daemon's loop, ``routes`` maps requests to statuses, ``links``
finds what a token opens and answers through the engine, ``page`` is the HTML. ``start`` is
what the composition root calls.
"""

from __future__ import annotations

import ssl

from ..bounds import PeerLimits
from ..clock import Clock
from ..config import Settings
from ..config_answers import base_url
from ..engine.engine import Engine
from .http import AnswersListenError, HttpServer
from .links import ForwardAnswer, Links
from .routes import Routes

__all__ = ["AnswersListenError", "start"]

# a JSON answer or a form: the answer's data is bounded again by --max-pending-data-bytes
MAX_BODY_BYTES = 64 * 1024


async def start(settings: Settings, engine: Engine, clock: Clock, limits: PeerLimits,
                forward: ForwardAnswer | None = None) -> tuple[HttpServer, str]:
    """Bind the listener of ``settings.answers`` and point the engine's links at it; returns the
    server and the address it bound (port resolved). In a cluster ``forward`` sends an answer
    for a runtime another daemon owns to that daemon."""
    assert settings.answers is not None
    server = HttpServer(Routes(Links(engine, clock, forward), limits), max_body=MAX_BODY_BYTES,
                        ssl_context=_ssl(settings))
    bound = await server.start(settings.answers.listen)
    engine.answer_base = base_url(settings.answers, bound, settings.tls is not None)
    return server, bound


def _ssl(settings: Settings) -> ssl.SSLContext | None:
    """The daemon's certificate, without asking for a client one (a phone has none)."""
    if settings.tls is None:
        return None
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        ctx.load_cert_chain(settings.tls.cert, settings.tls.key)
    except (OSError, ssl.SSLError) as exc:
        raise AnswersListenError(f"cannot load --tls-cert/--tls-key for the answers listener: {exc}") from exc
    return ctx
