"""EventStream: the iterator ``Runtime.watch`` returns over a server-streaming ``Watch`` call.

A blocking face over the asyncio core's stream (``toolnexus_client.aio._watch``,
which owns the conversion, the error translation and the reopening after
UNAVAILABLE or a Watch that fell behind, with no gap and no duplicate):
``next`` waits for the core's next item on the client's loop. It can be
cancelled from any thread (``cancel()``, leaving a ``with`` block, or the
runtime's ``detach()``/``shutdown()``), after which iteration simply stops:
the end of a stream this process asked for is not an error.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Generic, TypeVar

from ._loop import ClientClosed, LoopThread
from ._types import Event
from .aio._watch import RESUME, RESUME_AFTER, ResumePolicy, resume_after
from .aio._watch import ReopeningStream as CoreStream
from .errors import Cancelled

__all__ = ["RESUME", "RESUME_AFTER", "EventStream", "ResumePolicy", "StreamFace", "resume_after"]

T = TypeVar("T")


class StreamFace(Generic[T]):
    """A core stream iterated from a plain thread; ``cancel()`` from any thread ends it quietly."""

    def __init__(self, core: CoreStream[T], loop: LoopThread) -> None:
        self._core = core
        self._loop = loop

    @property
    def reopened(self) -> int:
        """How many times the stream was opened again."""
        return self._core.reopened

    def __iter__(self) -> Iterator[T]:
        return self

    def __next__(self) -> T:
        try:
            return self._loop.run(_next(self._core))
        except StopAsyncIteration:
            raise StopIteration from None
        except (ClientClosed, Cancelled):
            if self._core.cancelled:  # detached while (or before) waiting: the stream just ends
                raise StopIteration from None
            raise

    def cancel(self) -> None:
        """Stop the stream; a thread blocked in ``next`` gets StopIteration."""
        self._core.ending()  # before the loop runs cancel(): a racing next() ends quietly
        self._loop.call_soon(self._core.cancel)

    def __exit__(self, *exc: object) -> None:
        self.cancel()


async def _next(core: CoreStream[T]) -> T:
    return await core.__anext__()


class EventStream(StreamFace[Event]):
    """Events of one runtime in ``seq`` order: the stored ones after ``after_seq``, then live ones."""

    def ending(self) -> None:
        """The stream is about to be ended on purpose (a shutdown): whatever breaks it from now on
        ends iteration quietly, while events already on their way are still delivered."""
        self._core.ending()

    def __enter__(self) -> EventStream:
        return self
