"""EventStream: the async iterator ``aio.Runtime.watch`` returns over a server-streaming ``Watch`` call.

``async for event in rt.watch(): ...`` converts each protobuf Event and
translates stream errors into ToolnexusError. ``cancel()``, leaving an
``async with`` block, or the runtime's ``detach()``/``shutdown()`` end the
iteration quietly: the end of a stream this process asked for is not an error.
A stream the daemon ends with UNAVAILABLE is reopened after the last seq received, as
the blocking client does (``ResumePolicy``), and so is a Watch it ended with
RESOURCE_EXHAUSTED because the reader fell behind (after the seq its trailers name).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import grpc
import grpc.aio

from .. import _convert as convert
from .._types import Event
from .._watch import RESUME, ResumePolicy, resume_after
from ..errors import from_rpc_error

T = TypeVar("T")


class ReopeningStream(Generic[T]):
    """The asyncio twin of ``toolnexus_client._watch.ReopeningStream``: reopened after
    UNAVAILABLE from where ``_open_again`` says, messages turned into ``T`` by ``_converted``."""

    def __init__(self, resume: ResumePolicy) -> None:
        self._resume = resume
        self._cancelled = False
        self._failures = 0
        self.reopened = 0  # how many times the stream was opened again
        self._call = self._open_again()

    def _open_again(self) -> Any:
        raise NotImplementedError

    def _converted(self, message: Any) -> T:
        raise NotImplementedError

    def _resumable(self, err: grpc.RpcError) -> bool:
        """Whether the stream ``err`` ended is opened again: UNAVAILABLE (a subclass adds more)."""
        return bool(err.code() is grpc.StatusCode.UNAVAILABLE)

    def __aiter__(self) -> ReopeningStream[T]:
        return self

    async def __anext__(self) -> T:
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
            return self._converted(message)

    async def _reopen(self, err: grpc.RpcError) -> bool:
        """After UNAVAILABLE: wait, then open the stream again (``_open_again``)."""
        if not self._resumable(err) or self._failures >= self._resume.attempts:
            return False
        await asyncio.sleep(self._resume.delay(self._failures))
        self._failures += 1
        if self._cancelled:
            raise StopAsyncIteration
        self._call = self._open_again()
        self.reopened += 1
        return True

    def cancel(self) -> None:
        """Stop the stream; a pending ``__anext__`` ends the iteration."""
        self._cancelled = True
        self._call.cancel()

    async def __aexit__(self, *exc: object) -> None:
        self.cancel()


class EventStream(ReopeningStream[Event]):
    """Events of one runtime in ``seq`` order: the stored ones after ``after_seq``, then live ones."""

    def __init__(self, open_call: Callable[[int], Any], after_seq: int = 0,
                 resume: ResumePolicy = RESUME) -> None:
        self._open, self._last = open_call, after_seq
        super().__init__(resume)

    def _open_again(self) -> Any:
        return self._open(self._last)

    def _converted(self, message: Any) -> Event:
        event = convert.event_from_pb(message)
        self._last = event.seq or self._last  # a live text delta has no seq
        return event

    def _resumable(self, err: grpc.RpcError) -> bool:
        after = resume_after(err)
        if after is not None:  # every event up to it was sent (or filtered out): go on after it
            self._last = max(self._last, after)
            return True
        return super()._resumable(err)

    def ending(self) -> None:
        """The stream is about to be ended on purpose (a shutdown): whatever breaks it from now on
        ends iteration quietly, while events already on their way are still delivered."""
        self._cancelled = True

    async def __aenter__(self) -> EventStream:
        return self
