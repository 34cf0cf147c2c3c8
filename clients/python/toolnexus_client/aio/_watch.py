"""EventStream: the async iterator ``aio.Runtime.watch`` returns over a server-streaming ``Watch`` call.

``async for event in rt.watch(): ...`` converts each protobuf Event and
translates stream errors into ToolnexusError. ``cancel()``, leaving an
``async with`` block, or the runtime's ``detach()``/``shutdown()`` end the
iteration quietly: the end of a stream this process asked for is not an error.
A stream the daemon ends with UNAVAILABLE is reopened after the last seq received, as
the blocking client does (``ResumePolicy``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import grpc
import grpc.aio

from .. import _convert as convert
from .._types import Event
from .._watch import RESUME, ResumePolicy
from ..errors import from_rpc_error


class EventStream:
    """Events of one runtime in ``seq`` order: the stored ones after ``after_seq``, then live ones."""

    def __init__(self, open_call: Callable[[int], Any], after_seq: int = 0,
                 resume: ResumePolicy = RESUME) -> None:
        self._open, self._last, self._resume = open_call, after_seq, resume
        self._call = open_call(after_seq)
        self._cancelled = False
        self._failures = 0

    def __aiter__(self) -> EventStream:
        return self

    async def __anext__(self) -> Event:
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
            event = convert.event_from_pb(message)
            self._last = event.seq or self._last  # a live text delta has no seq
            self._failures = 0
            return event

    async def _reopen(self, err: grpc.RpcError) -> bool:
        """After UNAVAILABLE: wait, then open the stream again after the last seq received."""
        if err.code() is not grpc.StatusCode.UNAVAILABLE or self._failures >= self._resume.attempts:
            return False
        await asyncio.sleep(self._resume.delay(self._failures))
        self._failures += 1
        if self._cancelled:
            raise StopAsyncIteration
        self._call = self._open(self._last)
        return True

    def ending(self) -> None:
        """The stream is about to be ended on purpose (a shutdown): whatever breaks it from now on
        ends iteration quietly, while events already on their way are still delivered."""
        self._cancelled = True

    def cancel(self) -> None:
        """Stop the stream; a pending ``__anext__`` ends the iteration."""
        self._cancelled = True
        self._call.cancel()

    async def __aenter__(self) -> EventStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.cancel()
