"""PendingStream: the iterator ``Daemon.watch_pending`` returns over a ``WatchPending`` call.

The stream is a list-watch (docs/protocol.md §10): an ``ADDED`` for every open
suspension, one ``SYNCED``, then ``ADDED`` / ``REMOVED`` as they change. There is
no sequence number to resume from, so a stream the daemon ends with UNAVAILABLE
(a restart, a shutdown, a cluster move) is opened again from the start, with
the backoff of ``ResumePolicy``: the full list arrives again, followed by a new
``SYNCED``, and a consumer keeping a set of open requests rebuilds it from the
``ADDED`` between reopening and ``SYNCED`` (``reopened`` counts the reopenings).
Any other error, or UNAVAILABLE for longer than the policy allows, ends
iteration with the error; ``cancel()`` ends it quietly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._pending import PendingChange, change_from_pb
from ._watch import RESUME, ReopeningStream, ResumePolicy


class PendingStream(ReopeningStream[PendingChange]):
    """Changes of the open suspensions, starting with the full list (again after each reopen)."""

    def __init__(self, open_call: Callable[[], Any], resume: ResumePolicy = RESUME) -> None:
        self._open = open_call
        super().__init__(resume)

    def _open_again(self) -> Any:
        return self._open()  # a list-watch has nothing to resume from: the full list again

    def _converted(self, message: Any) -> PendingChange:
        return change_from_pb(message)

    def __enter__(self) -> PendingStream:
        return self
