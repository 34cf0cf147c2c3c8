"""A turn's hold on the runtime's concurrency limit (``max_concurrent_turns``) during a model call.

A model call holds one slot while it talks to the model, but not while it waits to retry: a
server answering 429 with a long ``Retry-After`` would otherwise starve every other handle of
the runtime. Giving the slot up and taking it back is tracked, so a cancellation while taking it
back never releases a slot this turn does not hold.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable


class TurnSlot:
    """``async with`` holds a slot of ``gate``; ``sleep_outside`` waits without it."""

    def __init__(self, gate: asyncio.Semaphore, sleep: Callable[[float], Awaitable[None]]) -> None:
        self._gate = gate
        self._sleep = sleep  # the runtime clock's sleep: engine tests wait on virtual time
        self._held = False

    async def __aenter__(self) -> TurnSlot:
        await self._gate.acquire()
        self._held = True
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._release()

    async def sleep_outside(self, seconds: float) -> None:
        """Wait ``seconds`` with the slot given up, then take it back."""
        self._release()
        try:
            await self._sleep(seconds)
        finally:
            await self._gate.acquire()
            self._held = True

    def _release(self) -> None:
        if self._held:
            self._held = False
            self._gate.release()
