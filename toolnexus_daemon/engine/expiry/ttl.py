"""``RuntimeOptions.pending_ttl_ms``: a deadline for suspensions that bring none (docs/protocol.md §10).

Written into the Request before it is committed and announced, so the client that is
told ``pending``, the request index and the store's expiry index all hold the same
``expires_at`` — and the deadline survives a restart like any other.
"""

from __future__ import annotations

from dataclasses import replace

from ...clock import rfc3339
from ...model import Request


def with_ttl(request: Request, ttl_ms: int, now: float) -> Request:
    """``request`` with ``expires_at`` ``now`` + ``ttl_ms`` when it has none and a ttl is set."""
    if request.expires_at or ttl_ms <= 0:
        return request
    expires = rfc3339(now + ttl_ms / 1000)
    return replace(request, expires_at=expires)
