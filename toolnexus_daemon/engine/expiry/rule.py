"""The one rule that decides whether a pending request has expired (docs/protocol.md §10).

A request whose ``expires_at`` is T has expired at every instant ``now >= T``, compared in whole
microseconds (what every store's expiry index keeps). At T itself the daemon's own decline is due —
the deadline scheduler fires then — so an answer that reaches the daemon at T is a decline with
reason ``expired`` too, an escalation's inline answer at T is one, and an answer link opened at T
reads as expired. An ``expires_at`` that does not parse never expires, as the store's index keeps
no row for it. Resume, escalation, the scheduler and the answer links all ask this module, so they
cannot disagree at the boundary.
"""

from __future__ import annotations

from ...clock import parse_rfc3339
from ...model import Request

# the reason of the decline an expired request gets (what the model reads: ``declined/expired``)
EXPIRED = "expired"


def deadline_of(request: Request) -> float | None:
    """Seconds since the epoch at which ``request`` expires, or None when it never does."""
    return parse_rfc3339(request.expires_at) if request.expires_at else None


def due(deadline: float, now: float) -> bool:
    """Whether a deadline of ``deadline`` has passed at ``now``: the boundary itself is due."""
    return _micros(now) >= _micros(deadline)


def expired(request: Request, now: float) -> bool:
    """Whether ``request`` has expired at ``now`` (``now >= expires_at``, to the microsecond)."""
    deadline = deadline_of(request)
    return deadline is not None and due(deadline, now)


def _micros(when: float) -> int:
    # whole microseconds, as the stores keep an expiry: a deadline read back from an index is then
    # due exactly when the request's own ``expires_at`` is
    return int(when * 1_000_000)
