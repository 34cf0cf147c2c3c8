"""The retry policy of the HTTP model transports, as small pure functions.

Kept apart from the transport so the policy (what retries, how long to wait)
can be read and unit-tested without a server. Delays use exponential backoff
with *full jitter* (AWS architecture blog, "Exponential Backoff And Jitter"):
many sidecars retrying one overloaded provider in lock step would keep it
overloaded, so each waits a uniformly random slice of the backoff window.
"""

from __future__ import annotations

from collections.abc import Callable

# 429 = rate limited; 5xx gateway/overload codes are usually transient. Other
# statuses (400 bad body, 401 bad key, 404 bad model) fail the same way again.
RETRYABLE_STATUSES: frozenset[int] = frozenset({429, 500, 502, 503, 504})


def total_attempts(retries: int) -> int:
    """The first attempt plus ``retries`` more; a negative setting means no retries."""
    return max(0, retries) + 1


def is_retryable_status(status: int) -> bool:
    """Whether an HTTP status is worth another attempt."""
    return status in RETRYABLE_STATUSES


def backoff_delay(attempt: int, base: float, cap: float, rand: Callable[[], float]) -> float:
    """Full-jitter backoff before retry number ``attempt + 1`` (``attempt`` counts from 0)."""
    # min() first so a large attempt cannot overflow the float before capping
    window = min(cap, base * 2 ** min(attempt, 62))
    return max(0.0, rand() * window)


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header, only when it is a whole number of seconds.

    An HTTP-date or a fractional value is ignored (None) on purpose: dates
    depend on clock agreement with the provider, and a malformed header must
    never make us wait an arbitrary time, so both fall back to backoff.
    """
    if value is None:
        return None
    text = value.strip()
    if not text or not text.isascii() or not text.isdigit():
        return None
    return float(int(text))


def retry_delay(attempt: int, retry_after: str | None, *, base: float, cap: float,
                rand: Callable[[], float]) -> float:
    """The wait before the next attempt: the server's ``Retry-After`` if usable, else backoff."""
    told = parse_retry_after(retry_after)
    if told is not None:
        return told
    return backoff_delay(attempt, base, cap, rand)
