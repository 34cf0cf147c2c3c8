"""A verb that changes state runs to its end, whether or not its caller stays to hear the outcome.

A caller goes away at any moment: a client's deadline passes, its connection drops, a daemon
that forwarded the call dies (cluster). gRPC then cancels the call's handler, and a verb
cancelled between its commit and what that commit promises leaves memory and the store saying
something nobody acts on — a Resume whose answer is durable but whose turn never launches
leaves the handle ``running`` with no turn behind it until the daemon restarts; a Close
cancelled while it stops the turn leaves the same. So each such verb runs in a task of its
own that the caller's cancellation does not reach: the caller stops waiting, the verb
finishes, and what it failed with after its caller left is logged, because nobody else hears it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any, TypeVar

log = logging.getLogger("toolnexus_daemon.engine")

T = TypeVar("T")


async def run_to_end(work: Coroutine[Any, Any, T]) -> T:
    """Await ``work`` in a task a cancellation of this caller does not cancel."""
    task = asyncio.ensure_future(work)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        if not task.done():
            task.add_done_callback(_orphaned)
        raise


def _orphaned(task: asyncio.Task[Any]) -> None:
    """The outcome of a verb whose caller left: read (so asyncio does not report it as never
    retrieved) and logged when it failed."""
    if task.cancelled():
        return
    exc = task.exception()
    if exc is not None:
        log.warning("a call failed after its caller went away",
                    extra={"error": f"{type(exc).__name__}: {exc}"})
