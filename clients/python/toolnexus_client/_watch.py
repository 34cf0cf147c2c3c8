"""EventStream: the iterator ``Runtime.watch`` returns over a server-streaming ``Watch`` call.

It converts each protobuf Event, translates stream errors into ToolnexusError,
and can be cancelled from any thread (``cancel()``, leaving a ``with`` block,
or the runtime's ``detach()``/``shutdown()``), after which iteration simply
stops: the end of a stream this process asked for is not an error.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc

from . import _convert as convert
from ._types import Event
from .errors import from_rpc_error


class EventStream:
    """Events of one runtime in ``seq`` order: the stored ones after ``after_seq``, then live ones."""

    def __init__(self, call: Any) -> None:
        self._call = call
        self._cancelled = False

    def __iter__(self) -> Iterator[Event]:
        return self

    def __next__(self) -> Event:
        try:
            message = next(self._call)
        except grpc.RpcError as err:
            if self._cancelled:
                raise StopIteration from None
            raise from_rpc_error(err) from err
        return convert.event_from_pb(message)

    def ending(self) -> None:
        """The stream is about to be ended on purpose (a shutdown): whatever breaks it from now on
        ends iteration quietly, while events already on their way are still delivered."""
        self._cancelled = True

    def cancel(self) -> None:
        """Stop the stream; a thread blocked in ``next`` gets StopIteration."""
        self._cancelled = True
        self._call.cancel()

    def __enter__(self) -> EventStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.cancel()
