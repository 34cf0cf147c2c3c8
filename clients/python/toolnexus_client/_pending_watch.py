"""PendingStream: the iterator ``Daemon.watch_pending`` returns over a ``WatchPending`` call.

The stream is a list-watch (docs/protocol.md §10): an ``ADDED`` for every open
suspension, one ``SYNCED``, then ``ADDED`` / ``REMOVED`` as they change. There is
no sequence number to resume from, so a stream the daemon ends with UNAVAILABLE
(a restart, a shutdown, a cluster move), or with RESOURCE_EXHAUSTED because the reader
fell behind (the ``x-toolnexus-relist`` trailer), is opened again from the start, with
the backoff of ``ResumePolicy``: the full list arrives again, followed by a new
``SYNCED``, and a consumer keeping a set of open requests rebuilds it from the
``ADDED`` between reopening and ``SYNCED`` (``reopened`` counts the reopenings).
Any other error, or UNAVAILABLE for longer than the policy allows, ends
iteration with the error; ``cancel()`` ends it quietly.

A blocking face over the asyncio core's stream (``toolnexus_client.aio._pending``),
iterated on the client's loop like ``EventStream``.
"""

from __future__ import annotations

from ._pending import PendingChange
from ._watch import StreamFace


class PendingStream(StreamFace[PendingChange]):
    """Changes of the open suspensions, starting with the full list (again after each reopen)."""

    def __enter__(self) -> PendingStream:
        return self
