"""A registered wait for a handle's next settled result (Wait, and the fused Wake / Spawn).

The waiter is put on the handle before the caller yields, so a turn that settles at any later
point is seen; a fused wake registers it before its wake commits, which is what closes the
race between "woken" and "wait for the result" that two separate RPCs leave open.
"""

from __future__ import annotations

import asyncio

from ...clock import Clock
from ...model import Status, TaskResult
from .handle import Handle


class ResultWait:
    """One waiter of ``h``: ``result()`` awaits it with Wait's timeout semantics (``timeout_ms``
    0 = no limit; on timeout the pinned ``timeout`` result) and unregisters it however it ends;
    ``drop()`` unregisters it unawaited (a wake that failed or a wait cut short)."""

    def __init__(self, h: Handle, clock: Clock, timeout_ms: int) -> None:
        self.handle = h
        self._clock = clock
        self._timeout_ms = timeout_ms
        self._fut = h.live.waiter()

    async def result(self) -> TaskResult:
        h, timeout_ms = self.handle, self._timeout_ms
        try:
            if timeout_ms > 0:
                return await self._clock.wait_for(asyncio.shield(self._fut), timeout_ms / 1000)
            return await asyncio.shield(self._fut)
        except TimeoutError:
            return h.result(Status.TIMEOUT, f"wait timeout after {timeout_ms}ms (child still {h.state})")
        finally:
            self.drop()

    def drop(self) -> None:
        self.handle.live.drop(self._fut)
