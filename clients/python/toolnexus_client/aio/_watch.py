"""EventStream: the async iterator ``aio.Runtime.watch`` returns over a server-streaming ``Watch`` call.

The one implementation of the client's watches: the blocking ``EventStream`` and
``PendingStream`` iterate these on their client's loop (``toolnexus_client._loop``).

``async for event in rt.watch(): ...`` converts each protobuf Event and
translates stream errors into ToolnexusError. ``cancel()``, leaving an
``async with`` block, or the runtime's ``detach()``/``shutdown()`` end the
iteration quietly: the end of a stream this process asked for is not an error.

A stream the daemon ends with UNAVAILABLE — it restarted, it is shutting down, or in a
cluster the runtime moved to another daemon — is opened again after the last seq
received, with backoff, so iteration goes on with no gap and no duplicate
(``ResumePolicy``). So is a Watch the daemon ended with RESOURCE_EXHAUSTED because
its reader fell behind the live events: that status carries the seq to resume after
in its trailing metadata (``x-toolnexus-resume-after-seq``). Any other error (a
RESOURCE_EXHAUSTED without it: too many streams), or UNAVAILABLE for longer than the
policy allows, ends iteration with the error.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import grpc
import grpc.aio

from .. import _convert as convert
from .._types import Event
from ..errors import from_rpc_error

T = TypeVar("T")


@dataclass(frozen=True)
class ResumePolicy:
    """How long a watch keeps reopening a stream the daemon ended with UNAVAILABLE: up to
    ``attempts`` tries in a row, waiting ``first_s`` doubling to ``max_s`` between them."""

    attempts: int = 30
    first_s: float = 0.1
    max_s: float = 2.0

    def delay(self, attempt: int) -> float:
        return float(min(self.max_s, self.first_s * 2.0 ** attempt))


RESUME = ResumePolicy()
# the trailer of a Watch the daemon ended because its reader fell behind: the seq to resume after
RESUME_AFTER = "x-toolnexus-resume-after-seq"


def exhausted_trailer(err: Any, name: str) -> str | None:
    """The trailer ``name`` of a stream the daemon ended RESOURCE_EXHAUSTED, else None: how a
    reader that fell behind is told from a refusal (the stream limit carries no such trailer)."""
    if err.code() is not grpc.StatusCode.RESOURCE_EXHAUSTED:
        return None
    for key, value in err.trailing_metadata() or ():
        if key == name:
            return str(value)
    return None


def resume_after(err: Any) -> int | None:
    """The seq a Watch ended RESOURCE_EXHAUSTED for falling behind names in its trailers, else None."""
    value = exhausted_trailer(err, RESUME_AFTER)
    return int(value) if value is not None and value.isdigit() else None


class ReopeningStream(Generic[T]):
    """A server stream reopened after UNAVAILABLE (``ResumePolicy``) from where ``_open_again``
    says, its messages turned into ``T`` by ``_converted``; ``cancel()`` ends iteration quietly."""

    def __init__(self, resume: ResumePolicy) -> None:
        self._resume = resume
        self._cancelled = False
        self._woken = asyncio.Event()  # set by cancel(): a backoff between reopenings ends at once
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
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._woken.wait(), self._resume.delay(self._failures))
        self._failures += 1
        if self._cancelled:
            raise StopAsyncIteration
        self._call = self._open_again()
        self.reopened += 1
        return True

    @property
    def cancelled(self) -> bool:
        """Whether the stream was cancelled (or is ``ending``): its end is then no error."""
        return self._cancelled

    def ending(self) -> None:
        """The stream is about to be ended on purpose (a shutdown): whatever breaks it from now on
        ends iteration quietly, while events already on their way are still delivered."""
        self._cancelled = True

    def cancel(self) -> None:
        """Stop the stream; a pending ``__anext__`` ends the iteration (at once, even while it
        waits to reopen a stream the daemon ended)."""
        self._cancelled = True
        self._woken.set()
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

    async def __aenter__(self) -> EventStream:
        return self
