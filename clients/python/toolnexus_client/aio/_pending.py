"""PendingStream: the async iterator ``aio.Daemon.watch_pending`` returns over ``WatchPending``.

The asyncio twin of ``toolnexus_client.PendingStream``: a list-watch that, after
UNAVAILABLE, is opened again from the start (the full list, then ``SYNCED``)
with the backoff of ``ResumePolicy``; ``cancel()`` ends it quietly.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import grpc
import grpc.aio

from .._pending import PendingChange, change_from_pb
from .._watch import RESUME, ResumePolicy
from ..errors import from_rpc_error


class PendingStream:
    """Changes of the open suspensions, starting with the full list (again after each reopen)."""

    def __init__(self, open_call: Callable[[], Any], resume: ResumePolicy = RESUME) -> None:
        self._open, self._resume = open_call, resume
        self._call = open_call()
        self._cancelled = False
        self._failures = 0
        self.reopened = 0

    def __aiter__(self) -> PendingStream:
        return self

    async def __anext__(self) -> PendingChange:
        while True:
            try:
                message = await self._call.read()
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if self._cancelled and (task is None or task.cancelling() == 0):
                    raise StopAsyncIteration from None  # our cancel(), not a cancellation of this task
                raise
            except grpc.RpcError as err:
                if self._cancelled:
                    raise StopAsyncIteration from None
                if not await self._reopen(err):
                    raise from_rpc_error(err) from err
                continue
            if message is grpc.aio.EOF:
                raise StopAsyncIteration
            self._failures = 0
            return change_from_pb(message)

    async def _reopen(self, err: grpc.RpcError) -> bool:
        """After UNAVAILABLE: wait, then open the stream again from the start (the full list)."""
        if err.code() is not grpc.StatusCode.UNAVAILABLE or self._failures >= self._resume.attempts:
            return False
        await asyncio.sleep(self._resume.delay(self._failures))
        self._failures += 1
        if self._cancelled:
            raise StopAsyncIteration
        self._call = self._open()
        self.reopened += 1
        return True

    def cancel(self) -> None:
        """Stop the stream; a pending ``__anext__`` ends the iteration."""
        self._cancelled = True
        self._call.cancel()

    async def __aenter__(self) -> PendingStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.cancel()
