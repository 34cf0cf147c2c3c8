"""A WatchPending watcher's backlog is bounded: one that falls behind ends RESOURCE_EXHAUSTED."""

from __future__ import annotations

import pytest

from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_daemon.api.pending_watch import WATCH_BACKLOG, Watcher
from toolnexus_daemon.errors import ResourceExhausted, Unavailable


async def test_a_watcher_that_falls_behind_is_ended_not_buffered_without_bound() -> None:
    watcher = Watcher(runtime_id="", kind="", presented="")
    for n in range(WATCH_BACKLOG + 5):
        watcher.offer(pb.PendingChange(type="ADDED", item=pb.PendingItem(handle=f"root/h{n}")))
    assert len(watcher.backlog) == WATCH_BACKLOG and watcher.overflowed
    with pytest.raises(ResourceExhausted, match="fell 10000 changes behind"):
        async for _ in watcher.changes():
            raise AssertionError("an overflowed watcher must not be fed a partial history")


async def test_a_watcher_ended_by_shutdown_gets_what_it_has_then_unavailable() -> None:
    watcher = Watcher(runtime_id="", kind="", presented="")
    watcher.offer(pb.PendingChange(type="ADDED", item=pb.PendingItem(handle="root/a")))
    watcher.ended = "the daemon is shutting down"
    got = []
    with pytest.raises(Unavailable, match="shutting down"):
        async for change in watcher.changes():
            got.append(change.item.handle)
    assert got == ["root/a"]
