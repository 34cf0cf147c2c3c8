"""PendingStream: the async iterator ``aio.Daemon.watch_pending`` returns over ``WatchPending``.

A list-watch that, after UNAVAILABLE, is opened again from the start (the full
list, then ``SYNCED``) with the backoff of ``ResumePolicy``; ``cancel()`` ends it
quietly. The blocking ``toolnexus_client.PendingStream`` iterates this one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._pending import PendingChange, change_from_pb
from ._watch import RESUME, ReopeningStream, ResumePolicy


class PendingStream(ReopeningStream[PendingChange]):
    """Changes of the open suspensions, starting with the full list (again after each reopen)."""

    def __init__(self, open_call: Callable[[], Any], resume: ResumePolicy = RESUME) -> None:
        self._open = open_call
        super().__init__(resume)

    def _open_again(self) -> Any:
        return self._open()  # the full list again

    def _converted(self, message: Any) -> PendingChange:
        return change_from_pb(message)

    async def __aenter__(self) -> PendingStream:
        return self
