"""When an open suspension expires: the one rule every store's expiry index is kept by.

A handle record contributes an expiry row when it is an open suspension (a suspended
leaf with a pending Request, as ``summary.contribution`` decides), not parked on an inline
escalation (a resolver worker answers that one while the turn waits), and its Request
carries an ``expires_at`` that reads as a timestamp. The daemon resolves the suspension
as a decline with reason ``expired`` once that time passes (docs/protocol.md §10); an
``expires_at`` that does not parse never expires, exactly as an answer after it is judged.
"""

from __future__ import annotations

from ..clock import parse_rfc3339
from ..model import JSON
from .summary import contribution, summarize

# expiries are kept in whole microseconds since the epoch, as an unsigned 64-bit key part
MAX_EXPIRY_US = (1 << 64) - 1


def expiry_of(record: JSON) -> float | None:
    """Seconds since the epoch at which ``record``'s open suspension expires, or None."""
    pending = record.get("pending")
    if not isinstance(pending, dict) or not pending.get("expires_at") or record.get("escalating"):
        return None  # the common case, settled without summarising the record
    if contribution(summarize(record)).open_kind is None:
        return None
    when = parse_rfc3339(pending.get("expires_at"))
    return None if when is None else micros(when) / 1e6  # what every store keeps, to the microsecond


def micros(when: float) -> int:
    """``when`` as whole microseconds, clamped to what a key holds (a year 9999 date fits)."""
    return min(MAX_EXPIRY_US, max(0, int(when * 1e6)))
