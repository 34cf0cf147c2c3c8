"""Time behind one protocol, so engine tests can run on a virtual clock."""

from __future__ import annotations

import asyncio
import contextlib
import math
import re
import time
from collections.abc import Awaitable
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

T = TypeVar("T")


class Clock(Protocol):
    def now(self) -> float:
        """Seconds since the epoch."""

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (durations: latencies, waits)."""

    async def sleep(self, seconds: float) -> None:
        """Suspend the caller for ``seconds``."""

    async def wait_for(self, aw: Awaitable[T], seconds: float) -> T:
        """``aw``'s result, or ``TimeoutError`` (``aw`` cancelled) once ``seconds`` have passed."""

    async def wait_done(self, fut: asyncio.Future[Any], seconds: float) -> None:
        """Return when ``fut`` is done or ``seconds`` have passed; never cancels ``fut``."""


class SystemClock:
    def now(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    async def wait_for(self, aw: Awaitable[T], seconds: float) -> T:
        return await asyncio.wait_for(aw, seconds)

    async def wait_done(self, fut: asyncio.Future[Any], seconds: float) -> None:
        await asyncio.wait({fut}, timeout=seconds)


class ManualClock:
    """A virtual clock for engine tests: time moves only when ``advance`` (or ``sleep``) says.

    Expiry, wall budgets and latencies become exact and instant to test — no dates in the past,
    no real waiting. Timeouts (``wait_for``, ``wait_done``: Wait's timeout_ms, tool deadlines,
    the close grace) fire only when the test advances the clock past them."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self._now = start
        self._mono = 0.0
        # timeouts under way: (monotonic deadline, future set when it passes)
        self._timers: list[tuple[float, asyncio.Future[None]]] = []

    def now(self) -> float:
        return self._now

    def monotonic(self) -> float:
        return self._mono

    def advance(self, seconds: float) -> None:
        """Move time on; every timeout whose deadline is now passed fires."""
        self._now += seconds
        self._mono += seconds
        due = [t for t in self._timers if t[0] <= self._mono]
        self._timers = [t for t in self._timers if t[0] > self._mono]
        for _, fut in due:
            if not fut.done():
                fut.set_result(None)

    async def sleep(self, seconds: float) -> None:
        self.advance(seconds)
        await asyncio.sleep(0)

    async def wait_for(self, aw: Awaitable[T], seconds: float) -> T:
        task = asyncio.ensure_future(aw)
        try:
            await self.wait_done(task, seconds)
        except BaseException:  # the caller was cancelled: so is what it waited for
            task.cancel()
            raise
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            raise TimeoutError
        return task.result()

    async def wait_done(self, fut: asyncio.Future[Any], seconds: float) -> None:
        if fut.done():
            return
        timer: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (self._mono + seconds, timer)
        self._timers.append(entry)
        if seconds <= 0:
            self.advance(0)
        try:
            await asyncio.wait({fut, timer}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if entry in self._timers:
                self._timers.remove(entry)


# (whole second, its formatted prefix): one entry, reused; replaced as one tuple, so a thread that
# reads it (log lines are stamped off the event loop too) never pairs one second with another's text
_last_second: tuple[int, str] = (-1, "")
_MAX_SECOND = 253402300799  # 9999-12-31T23:59:59Z; beyond it (and before 1970) datetime decides


def rfc3339(ts: float) -> str:
    """An RFC 3339 UTC timestamp with millisecond precision.

    Every event and log line is stamped, so this runs several times per cycle: the seconds part
    is formatted once per second and reused; the result is the same string as
    ``datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds")`` (microseconds rounded
    half-even as ``fromtimestamp`` does, then truncated to milliseconds).
    """
    frac, whole = math.modf(ts)
    us = round(frac * 1e6)
    second = int(whole)
    if us >= 1_000_000:
        second, us = second + 1, us - 1_000_000
    elif us < 0:
        second, us = second - 1, us + 1_000_000
    if not 0 <= second <= _MAX_SECOND:
        return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    global _last_second
    last = _last_second
    if last[0] != second:
        last = _last_second = (second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second)))
    return f"{last[1]}.{us // 1000:03d}Z"


# RFC 3339 section 5.6 date-time, a time zone required (Z or ±hh:mm), "T" and "Z" in either case
_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})", re.ASCII)


def strict_rfc3339(text: str) -> str | None:
    """``text`` if it is an RFC 3339 date-time with a time zone that denotes a real instant
    (``2026-12-05T10:00:00Z``, ``2026-12-05T12:00:00.5+02:00``), upper-cased; else None.

    What a peer (a tool) sets as a deadline must mean one instant to every reader: the engine,
    the store's expiry index, PostgreSQL's ``timestamptz``. ``datetime.fromisoformat`` alone
    also takes a date, a local time with no zone, ``20261205T1000`` and week dates, which
    PostgreSQL reads otherwise or not at all; a leap second (``:60``) has no ``datetime`` either."""
    if not _RFC3339.fullmatch(text):
        return None
    normalized = text.upper()
    try:
        at = datetime.fromisoformat(normalized.replace("Z", "+00:00"))
    except ValueError:  # month 13, hour 24, an offset of +24:00 ...
        return None
    return normalized if at.tzinfo is not None else None


def parse_rfc3339(text: object) -> float | None:
    """Seconds since the epoch, or None if ``text`` is not a timestamp (a record stored before
    peer data was bounded may hold a number or an object here; it reads as no expiry)."""
    if not isinstance(text, str):
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
