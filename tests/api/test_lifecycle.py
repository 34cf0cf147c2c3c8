"""Post, Close, Shutdown and reattaching New, over the wire."""

from __future__ import annotations

import grpc

from tests.support.grpc_client import code_of, native_agent, openai_llm
from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_daemon.api._gen import runtime_pb2_grpc as pb_grpc

LLM = openai_llm("http://127.0.0.1:9/v1")


def _runtime_with_child(stub: pb_grpc.AgentRuntimeStub) -> tuple[str, str]:
    rid = stub.New(pb.NewRequest(agents=[native_agent("a", "t")], llm=LLM), timeout=5).runtime_id
    return rid, stub.Spawn(pb.SpawnRequest(runtime_id=rid, agent="a"), timeout=5).handle


def test_post_lands_in_the_inbox(stub: pb_grpc.AgentRuntimeStub) -> None:
    rid, handle = _runtime_with_child(stub)
    item = pb.InboxItem(channel="chat", text="hi there", **{"from": "ops"})
    stub.Post(pb.PostRequest(runtime_id=rid, handle=handle, item=item), timeout=5)
    snap = stub.Snapshot(pb.SnapshotRequest(runtime_id=rid, handle=handle), timeout=5)
    assert [(getattr(i, "from"), i.channel, i.text) for i in snap.inbox] == [("ops", "chat", "hi there")]


def test_post_answers_the_place_in_the_inbox_and_the_cap(stub: pb_grpc.AgentRuntimeStub) -> None:
    """A sender learns where its item stands, so it can see the inbox filling before a rejection."""
    rid, handle = _runtime_with_child(stub)
    places = [stub.Post(pb.PostRequest(runtime_id=rid, handle=handle, item=pb.InboxItem(text=f"n{i}")),
                        timeout=5) for i in range(3)]
    assert [(p.position, p.inbox_cap) for p in places] == [(1, 8), (2, 8), (3, 8)]


def test_close_then_shutdown_keeps_state_and_purge_deletes_it(stub: pb_grpc.AgentRuntimeStub) -> None:
    rid, handle = _runtime_with_child(stub)
    stub.Close(pb.CloseRequest(runtime_id=rid, handle=handle), timeout=5)
    snap = stub.Snapshot(pb.SnapshotRequest(runtime_id=rid, handle=handle), timeout=5)
    assert snap.state == "closed"
    stub.Shutdown(pb.ShutdownRequest(runtime_id=rid), timeout=5)
    assert stub.Snapshot(pb.SnapshotRequest(runtime_id=rid, handle="root"), timeout=5).state == "closed"
    stub.Shutdown(pb.ShutdownRequest(runtime_id=rid, purge=True), timeout=5)
    code, _ = code_of(lambda: stub.Snapshot(pb.SnapshotRequest(runtime_id=rid, handle="root"), timeout=5))
    assert code is grpc.StatusCode.NOT_FOUND


def test_new_with_an_existing_id_reattaches_and_keeps_handles(stub: pb_grpc.AgentRuntimeStub) -> None:
    first = stub.New(pb.NewRequest(runtime_id="rt-reattach", agents=[native_agent("a", "t")], llm=LLM),
                     timeout=5)
    assert (first.runtime_id, first.root, first.reattached) == ("rt-reattach", "root", False)
    handle = stub.Spawn(pb.SpawnRequest(runtime_id="rt-reattach", agent="a"), timeout=5).handle
    again = stub.New(pb.NewRequest(runtime_id="rt-reattach", agents=[native_agent("a", "t2")], llm=LLM),
                     timeout=5)
    assert again.reattached
    assert stub.Snapshot(pb.SnapshotRequest(runtime_id="rt-reattach", handle=handle), timeout=5).id == handle
