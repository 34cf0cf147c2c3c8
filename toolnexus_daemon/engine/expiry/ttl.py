"""``RuntimeOptions.pending_ttl_ms``: a deadline for suspensions that bring none (docs/protocol.md §10).

Written into the Request before it is committed and announced, so the client that is
told ``pending``, the request index and the store's expiry index all hold the same
``expires_at`` — and the deadline survives a restart like any other.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from ...clock import rfc3339
from ...model import Request

if TYPE_CHECKING:
    from ..turn.context import RuntimeContext


def with_ttl(rt: RuntimeContext, request: Request) -> Request:
    """``request`` with ``expires_at`` now + the runtime's ttl when it has none and a ttl is set."""
    ttl_ms = rt.options.pending_ttl_ms
    if request.expires_at or ttl_ms <= 0:
        return request
    expires = rfc3339(rt.deps.clock.now() + ttl_ms / 1000)
    return replace(request, expires_at=expires)
