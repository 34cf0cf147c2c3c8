"""A commit on its way to disk while the turn asks the model (docs/architecture.md).

A model call has no effect outside the daemon: a crash before the commit it
follows is durable re-issues it, exactly as a crash during the call does. So the
commit that closes a step (the tool results) and the commit of a wake (the
user's prompt) need not be synced before the model is asked — only before
anything that depends on them leaves the daemon: the reply's record, the tool
calls it asks for, an answer to a client. The turn queues such a commit, asks
the model with the transcript entries the commit writes (``messages`` from
index ``first``), and waits for the commit before it records the reply. One
sync per such commit leaves the critical path of the cycle.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from ...errors import StoreError
from ...model import JSON


class WakeRefused(Exception):
    """The store refused the wake this turn was started with: the Wake's caller hears the error
    and memory was restored from the store, so the turn ends without recording anything."""


@dataclass
class Landing:
    """A queued, not yet durable commit that writes transcript ``messages`` from index ``first``.

    ``quiet``: the commit is a wake's, whose caller reports a refusal (the turn then stops
    silently); otherwise a refusal is the turn's own failure."""

    done: asyncio.Future[None]
    first: int
    messages: list[JSON]
    quiet: bool = False


async def landed(landing: Landing | None) -> None:
    """Wait until ``landing`` is durable; a refused commit raises ``StoreError`` (``WakeRefused``
    for a wake's)."""
    if landing is None:
        return
    try:
        await asyncio.shield(landing.done)
    except StoreError:
        if landing.quiet:
            raise WakeRefused() from None
        raise
