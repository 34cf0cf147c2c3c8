"""Time behind one protocol, so engine tests can run on a virtual clock."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Seconds since the epoch."""

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (durations: latencies, waits)."""

    async def sleep(self, seconds: float) -> None:
        """Suspend the caller for ``seconds``."""


class SystemClock:
    def now(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class ManualClock:
    """A virtual clock for engine tests: time moves only when ``advance`` (or ``sleep``) says.

    Expiry, wall budgets and latencies become exact and instant to test — no dates in the past,
    no real waiting."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self._now = start
        self._mono = 0.0

    def now(self) -> float:
        return self._now

    def monotonic(self) -> float:
        return self._mono

    def advance(self, seconds: float) -> None:
        self._now += seconds
        self._mono += seconds

    async def sleep(self, seconds: float) -> None:
        self.advance(seconds)
        await asyncio.sleep(0)


def rfc3339(ts: float) -> str:
    """An RFC 3339 UTC timestamp with millisecond precision."""
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_rfc3339(text: object) -> float | None:
    """Seconds since the epoch, or None if ``text`` is not a timestamp (a record stored before
    peer data was bounded may hold a number or an object here; it reads as no expiry)."""
    if not isinstance(text, str):
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
