"""WatchPending: a watcher's backlog is bounded (one that falls behind ends RESOURCE_EXHAUSTED), and a
protected runtime's suspensions reach only streams holding its key as the runtime is now."""

from __future__ import annotations

import uuid

import grpc
import pytest

from tests.api.test_pending import _key, new_runtime, park, until_synced
from tests.support.grpc_client import approval_agent, openai_llm
from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_daemon.api._gen import runtime_pb2_grpc as pb_grpc
from toolnexus_daemon.api.pending_watch import WATCH_BACKLOG, WATCH_BACKLOG_BYTES, Watcher
from toolnexus_daemon.errors import ResourceExhausted, Unavailable
from toolnexus_devtools import ScriptedModelServer


async def test_a_watcher_that_falls_behind_is_ended_not_buffered_without_bound() -> None:
    watcher = Watcher(runtime_id="", kind="", presented="")
    for n in range(WATCH_BACKLOG + 5):
        watcher.offer(pb.PendingChange(type="ADDED", item=pb.PendingItem(handle=f"root/h{n}")))
    assert len(watcher.backlog) == WATCH_BACKLOG and watcher.overflowed
    with pytest.raises(ResourceExhausted, match="fell more than 10000 changes or 8 MB behind"):
        async for _ in watcher.changes():
            raise AssertionError("an overflowed watcher must not be fed a partial history")


async def test_a_watcher_backlog_is_bounded_by_bytes_too() -> None:
    """Changes carrying large prompts overflow the backlog long before 10,000 of them."""
    watcher = Watcher(runtime_id="", kind="", presented="")
    big = pb.PendingItem(handle="root/a", request=pb.Request(id="q", kind="input", prompt="p" * 60_000))
    for _ in range(WATCH_BACKLOG_BYTES // 60_000 + 2):
        watcher.offer(pb.PendingChange(type="ADDED", item=big))
    assert watcher.overflowed and watcher.backlog_bytes <= WATCH_BACKLOG_BYTES
    assert len(watcher.backlog) < WATCH_BACKLOG_BYTES // 60_000 + 2


async def test_a_watcher_ended_by_shutdown_gets_what_it_has_then_unavailable() -> None:
    watcher = Watcher(runtime_id="", kind="", presented="")
    watcher.offer(pb.PendingChange(type="ADDED", item=pb.PendingItem(handle="root/a")))
    watcher.ended = "the daemon is shutting down"
    got = []
    with pytest.raises(Unavailable, match="shutting down"):
        async for change in watcher.changes():
            got.append(change.item.handle)
    assert got == ["root/a"]


# ------------------------------------------------------------------ keys, against a real daemon

def _open(stub: pb_grpc.AgentRuntimeStub, key: str = "") -> grpc.Future:
    return stub.WatchPending(pb.WatchPendingRequest(), timeout=20, metadata=_key(key))


def _until_added(watch: grpc.Future, rid: str, handle: str) -> list[pb.PendingChange]:
    """Changes up to the ADDED of ``handle`` of ``rid``."""
    seen: list[pb.PendingChange] = []
    for change in watch:
        seen.append(change)
        if change.type == "ADDED" and (change.item.runtime_id, change.item.handle) == (rid, handle):
            return seen
    raise AssertionError(f"the stream ended before the ADDED of {rid}/{handle}: {seen}")


@pytest.mark.parametrize("old_key", ["", "old-tenant-key"])
def test_a_runtime_recreated_under_another_key_is_shown_by_its_key_now(
        stub: pb_grpc.AgentRuntimeStub, model: ScriptedModelServer, old_key: str) -> None:
    """A runtime purged and created again under another tenant's key: its new suspensions reach the
    new key's streams, and none reach a stream without that key — one holding the old key, or
    none, opened before or after the re-creation."""
    rid = f"recreated-{uuid.uuid4().hex[:8]}"
    new_key = "new-tenant-key"
    old = stub.New(pb.NewRequest(runtime_id=rid, agents=[approval_agent("approver", model.approval_url)],
                                 llm=openai_llm(model.url), runtime_key=old_key), timeout=5).runtime_id
    old_handle = park(stub, old, key=old_key)
    before = _open(stub, old_key)  # holds the old key (or none, when the old runtime had none)
    anonymous = _open(stub)
    mine = _open(stub, new_key)
    try:
        assert old_handle in {c.item.handle for c in until_synced(before) if c.item.runtime_id == rid}
        until_synced(anonymous)
        until_synced(mine)
        stub.Shutdown(pb.ShutdownRequest(runtime_id=rid, purge=True), timeout=15, metadata=_key(old_key))
        assert new_runtime_as(stub, model, rid, new_key) == rid
        secret = park(stub, rid, key=new_key)
        got = [c.item.handle for c in _until_added(mine, rid, secret) if c.item.runtime_id == rid
               and c.type == "ADDED"]
        assert got == [secret]
        after = _open(stub)  # opened after the re-creation
        assert rid not in {c.item.runtime_id for c in until_synced(after)}
        # a change of an unprotected runtime, after the new tenant's one: every stream gets it, so
        # whatever a stream got before it is all it was ever going to get of the new tenant
        marker_rid = new_runtime(stub, model)
        marker = park(stub, marker_rid)
        for stream in (before, anonymous, after):
            leaked = [(c.type, c.item.request.prompt) for c in _until_added(stream, marker_rid, marker)
                      if c.item.runtime_id == rid and c.type == "ADDED"]
            assert leaked == [], leaked
    finally:
        for stream in (before, anonymous, mine):
            stream.cancel()


def new_runtime_as(stub: pb_grpc.AgentRuntimeStub, model: ScriptedModelServer, rid: str, key: str) -> str:
    new = pb.NewRequest(runtime_id=rid, agents=[approval_agent("approver", model.approval_url)],
                        llm=openai_llm(model.url), runtime_key=key)
    return stub.New(new, timeout=5, metadata=_key(key)).runtime_id
