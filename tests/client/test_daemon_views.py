"""``Daemon`` / ``aio.Daemon``: list_pending (paged and iterated), list_runtimes and watch_pending.

A scripted AgentRuntime server on 127.0.0.1 pins the client's side of the contract — the request
each call sends, the paging, the metadata, and the list-watch reopening from the full list after
UNAVAILABLE — and the real daemon, once it serves these RPCs, the round trip.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from concurrent import futures

import grpc
import pytest

from tests.support.daemon import DaemonProcess
from tests.support.grpc_client import approval_agent, openai_llm
from toolnexus_client import Daemon, PendingChangeType, PendingItem, Request, aio
from toolnexus_client._gen import runtime_pb2 as pb
from toolnexus_client._gen import runtime_pb2_grpc as pb_grpc
from toolnexus_client.errors import InvalidArgument
from toolnexus_daemon.api._gen import runtime_pb2 as dpb
from toolnexus_daemon.api._gen import runtime_pb2_grpc as dpb_grpc
from toolnexus_devtools import ScriptedModelServer


def _item(n: int, runtime: str = "rt-1") -> pb.PendingItem:
    return pb.PendingItem(request=pb.Request(id=f"req-{n}", kind="approval", prompt=f"ok {n}?"),
                          runtime_id=runtime, handle=f"root/a.{n}", top_handle=f"root/a.{n}",
                          created_at="2026-01-01T00:00:00Z", agent="a")


class PendingServer(pb_grpc.AgentRuntimeServicer):
    """Serves five items two per page, two runtimes, and a WatchPending that drops its first stream."""

    def __init__(self) -> None:
        self.items = [_item(n) for n in range(5)]
        self.requests: list[object] = []
        self.metadata: list[list[tuple[str, str]]] = []
        self.watches = 0

    def ListPending(self, request: pb.ListPendingRequest,
                    context: grpc.ServicerContext) -> pb.ListPendingResponse:
        self.requests.append(request)
        self.metadata.append(list(context.invocation_metadata()))
        start = int(request.page_token or 0)
        end = start + 2
        return pb.ListPendingResponse(items=self.items[start:end],
                                      next_page_token=str(end) if end < len(self.items) else "")

    def ListRuntimes(self, request: pb.ListRuntimesRequest,
                     context: grpc.ServicerContext) -> pb.ListRuntimesResponse:
        if request.page_token == "":
            return pb.ListRuntimesResponse(runtimes=[pb.RuntimeSummary(
                runtime_id="rt-1", created_at="2026-01-01T00:00:00Z", handles={"suspended": 5}, pending=5)],
                next_page_token="p2")
        return pb.ListRuntimesResponse(runtimes=[pb.RuntimeSummary(runtime_id="rt-2", keyed=True)])

    def WatchPending(self, request: pb.WatchPendingRequest,
                     context: grpc.ServicerContext) -> Iterator[pb.PendingChange]:
        self.watches += 1
        self.requests.append(request)
        yield pb.PendingChange(type="ADDED", item=self.items[0])
        yield pb.PendingChange(type="SYNCED")
        if self.watches == 1:
            yield pb.PendingChange(type="REMOVED", item=self.items[0], reason="answered")
            context.abort(grpc.StatusCode.UNAVAILABLE, "daemon shutting down")
        ended = threading.Event()
        if context.add_callback(ended.set):
            ended.wait(30)


@pytest.fixture
def served() -> Iterator[tuple[PendingServer, str]]:
    servicer = PendingServer()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    pb_grpc.add_AgentRuntimeServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield servicer, f"127.0.0.1:{port}"
    finally:
        server.stop(0)


def test_list_pending_sends_the_filters_and_returns_typed_items(served: tuple[PendingServer, str]) -> None:
    server, target = served
    with Daemon(target, token="tok", runtime_key="k1") as d:
        page = d.list_pending(runtime_id="rt-1", kind="approval", min_age_ms=5, max_age_ms=9, page_size=2)
    assert page.next_page_token == "2"
    assert page.items[0] == PendingItem(request=Request(id="req-0", kind="approval", prompt="ok 0?"),
                                        runtime_id="rt-1", handle="root/a.0", top_handle="root/a.0",
                                        created_at="2026-01-01T00:00:00Z", expires_at=None, agent="a")
    sent = server.requests[0]
    assert isinstance(sent, pb.ListPendingRequest)
    assert (sent.runtime_id, sent.kind, sent.min_age_ms, sent.max_age_ms, sent.page_size) == (
        "rt-1", "approval", 5, 9, 2)
    md = server.metadata[0]
    assert ("authorization", "Bearer tok") in md
    assert [v for k, v in md if k == "x-toolnexus-runtime-key"] == ["k1"]


def test_iter_pending_walks_every_page(served: tuple[PendingServer, str]) -> None:
    server, target = served
    with Daemon(target) as d:
        ids = [i.request.id for i in d.iter_pending()]
        runtimes = [r.runtime_id for r in d.iter_runtimes()]
    assert ids == [f"req-{n}" for n in range(5)]
    assert [r.page_token for r in server.requests if isinstance(r, pb.ListPendingRequest)] == ["", "2", "4"]
    assert runtimes == ["rt-1", "rt-2"]


def test_list_runtimes_returns_counts_by_state(served: tuple[PendingServer, str]) -> None:
    _, target = served
    with Daemon(target) as d:
        page = d.list_runtimes()
    assert page.next_page_token == "p2"
    assert (page.runtimes[0].handles, page.runtimes[0].pending) == ({"suspended": 5}, 5)


def test_negative_bounds_are_refused_before_sending(served: tuple[PendingServer, str]) -> None:
    server, target = served
    with Daemon(target) as d, pytest.raises(ValueError, match="min_age_ms"):
        d.list_pending(min_age_ms=-1)
    assert server.requests == []


def test_target_and_token_come_from_the_environment(served: tuple[PendingServer, str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    server, target = served
    monkeypatch.setenv("TOOLNEXUS_TARGET", target)
    monkeypatch.setenv("TOOLNEXUS_TOKEN", "from-env")
    with Daemon() as d:
        assert d.target == target
        d.list_pending()
    assert ("authorization", "Bearer from-env") in server.metadata[0]


def test_watch_pending_reopens_from_the_full_list_after_unavailable(
        served: tuple[PendingServer, str]) -> None:
    server, target = served
    with Daemon(target) as d:
        stream = d.watch_pending(runtime_id="rt-1", kind="approval")
        seen = [next(stream) for _ in range(5)]
        stream.cancel()
        assert list(stream) == []
    assert [(c.type, c.item.request.id if c.item else None, c.reason) for c in seen] == [
        ("ADDED", "req-0", ""), ("SYNCED", None, ""), ("REMOVED", "req-0", "answered"),
        ("ADDED", "req-0", ""), ("SYNCED", None, "")]
    assert seen[1].type is not PendingChangeType.ADDED and stream.reopened == 1
    assert server.watches == 2


def test_the_asyncio_daemon_lists_and_watches(served: tuple[PendingServer, str]) -> None:
    server, target = served

    async def scenario() -> tuple[list[str], list[str], list[str]]:
        async with aio.Daemon(target) as d:
            ids = [i.request.id async for i in d.iter_pending()]
            runtimes = [r.runtime_id async for r in d.iter_runtimes()]
            stream = d.watch_pending()
            types = []
            async for change in stream:
                types.append(change.type)
                if len(types) == 5:
                    break
            stream.cancel()
            return ids, runtimes, types

    ids, runtimes, types = asyncio.run(scenario())
    assert ids == [f"req-{n}" for n in range(5)] and runtimes == ["rt-1", "rt-2"]
    assert types == ["ADDED", "SYNCED", "REMOVED", "ADDED", "SYNCED"]
    assert server.watches == 2


def test_an_error_other_than_unavailable_ends_the_watch(served: tuple[PendingServer, str]) -> None:
    _, target = served

    class Refusing(pb_grpc.AgentRuntimeServicer):
        def WatchPending(self, request: object, context: grpc.ServicerContext) -> Iterator[pb.PendingChange]:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "kind too long")
            yield pb.PendingChange()  # never reached: makes this a generator

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    pb_grpc.add_AgentRuntimeServicer_to_server(Refusing(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with Daemon(f"127.0.0.1:{port}") as d, pytest.raises(InvalidArgument, match="kind too long"):
            list(d.watch_pending(kind="x" * 10))
    finally:
        server.stop(0)


# ------------------------------------------------------------ the real daemon

@pytest.fixture
def model() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as srv:
        yield srv


def test_the_real_daemon_lists_watches_and_removes_an_answered_request(
        daemon: DaemonProcess, model: ScriptedModelServer) -> None:
    channel = grpc.insecure_channel(daemon.target)
    stub = dpb_grpc.AgentRuntimeStub(channel)
    new = dpb.NewRequest(agents=[approval_agent("approver", model.approval_url)], llm=openai_llm(model.url))
    rid = stub.New(new, timeout=10).runtime_id
    handle = stub.Spawn(dpb.SpawnRequest(runtime_id=rid, agent="approver"), timeout=10).handle
    stub.Wake(dpb.WakeRequest(runtime_id=rid, handle=handle, prompt="go"), timeout=10)
    request_id = stub.Wait(dpb.WaitRequest(runtime_id=rid, handle=handle, timeout_ms=20_000),
                           timeout=30).pending.id
    channel.close()
    with Daemon(daemon.target) as d:
        [item] = d.list_pending(runtime_id=rid).items
        assert (item.request.id, item.handle, item.runtime_id) == (request_id, handle, rid)
        assert rid in {r.runtime_id for r in d.iter_runtimes()}
        stream = d.watch_pending(runtime_id=rid)
        first, synced = next(stream), next(stream)
        assert (first.type, synced.type) == ("ADDED", "SYNCED")
        d.resume(rid, {"id": request_id, "ok": True})
        removed = next(stream)
        stream.cancel()
        assert (removed.type, removed.reason, removed.item and removed.item.request.id) == (
            "REMOVED", "answered", request_id)
        assert d.list_pending(runtime_id=rid).items == ()
