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

import threading
from collections.abc import Callable, Iterator
from typing import Any

import grpc

from ._pending import PendingChange, change_from_pb
from ._watch import RESUME, ResumePolicy
from .errors import from_rpc_error


class PendingStream:
    """Changes of the open suspensions, starting with the full list (again after each reopen)."""

    def __init__(self, open_call: Callable[[], Any], resume: ResumePolicy = RESUME) -> None:
        self._open, self._resume = open_call, resume
        self._call = open_call()
        self._cancelled = False
        self._stop = threading.Event()
        self._failures = 0
        self.reopened = 0

    def __iter__(self) -> Iterator[PendingChange]:
        return self

    def __next__(self) -> PendingChange:
        while True:
            try:
                message = next(self._call)
            except grpc.RpcError as err:
                if self._cancelled:
                    raise StopIteration from None
                if not self._reopen(err):
                    raise from_rpc_error(err) from err
                continue
            self._failures = 0
            return change_from_pb(message)

    def _reopen(self, err: grpc.RpcError) -> bool:
        """After UNAVAILABLE: wait, then open the stream again from the start (the full list)."""
        if err.code() is not grpc.StatusCode.UNAVAILABLE or self._failures >= self._resume.attempts:
            return False
        self._stop.wait(self._resume.delay(self._failures))
        self._failures += 1
        if self._cancelled:
            raise StopIteration
        self._call = self._open()
        self.reopened += 1
        return True

    def cancel(self) -> None:
        """Stop the stream; a thread blocked in ``next`` gets StopIteration."""
        self._cancelled = True
        self._stop.set()
        self._call.cancel()

    def __enter__(self) -> PendingStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.cancel()
