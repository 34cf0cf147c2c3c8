"""Time behind one protocol, so engine tests can run on a virtual clock."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Seconds since the epoch."""

    async def sleep(self, seconds: float) -> None:
        """Suspend the caller for ``seconds``."""


class SystemClock:
    def now(self) -> float:
        return time.time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


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
