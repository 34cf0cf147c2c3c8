"""EventStream: the async iterator ``aio.Runtime.watch`` returns over a server-streaming ``Watch`` call.

``async for event in rt.watch(): ...`` converts each protobuf Event and
translates stream errors into ToolnexusError. ``cancel()``, leaving an
``async with`` block, or the runtime's ``detach()``/``shutdown()`` end the
iteration quietly: the end of a stream this process asked for is not an error.
"""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import grpc.aio

from .. import _convert as convert
from .._types import Event
from ..errors import from_rpc_error


class EventStream:
    """Events of one runtime in ``seq`` order: the stored ones after ``after_seq``, then live ones."""

    def __init__(self, call: Any) -> None:
        self._call = call
        self._cancelled = False

    def __aiter__(self) -> EventStream:
        return self

    async def __anext__(self) -> Event:
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
            raise from_rpc_error(err) from err
        if message is grpc.aio.EOF:
            raise StopAsyncIteration
        return convert.event_from_pb(message)

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
