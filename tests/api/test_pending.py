"""The pending inbox over gRPC (docs/protocol.md §10): ListPending, ListRuntimes and WatchPending
against a real daemon, with suspensions raised by real webhook tools of a scripted model server."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from tests.support.daemon import DaemonProcess
from tests.support.grpc_client import approval_agent, code_of, open_stub, openai_llm
from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_daemon.api._gen import runtime_pb2_grpc as pb_grpc
from toolnexus_devtools import ScriptedModelServer
from toolnexus_devtools.model_server import Received

KEY_HEADER = "x-toolnexus-runtime-key"
INPUT_PATH = "/tools/input"


def ask_input(req: Received) -> dict[str, object]:
    """A webhook tool that suspends on a request of kind ``input`` until answered."""
    call = req.json() or {}
    if isinstance(call.get("answer"), dict):
        return {"output": "thanks", "is_error": False}
    return {"output": "", "is_error": False,
            "pending": {"id": "input-" + str(call.get("handle")), "kind": "input", "prompt": "which one?"}}


@pytest.fixture
def server(model: ScriptedModelServer) -> ScriptedModelServer:
    model.route(INPUT_PATH, ask_input)
    return model


def new_runtime(stub: pb_grpc.AgentRuntimeStub, model: ScriptedModelServer, key: str = "") -> str:
    asker = approval_agent("asker", model.origin + INPUT_PATH)
    new = pb.NewRequest(agents=[approval_agent("approver", model.approval_url), asker],
                        llm=openai_llm(model.url), runtime_key=key)
    return stub.New(new, timeout=5, metadata=_key(key)).runtime_id


def park(stub: pb_grpc.AgentRuntimeStub, rid: str, agent: str = "approver", key: str = "",
         wait: bool = True) -> str:
    """Spawn a handle of ``agent`` and wake it; with ``wait``, return once it is suspended."""
    meta = _key(key)
    handle = stub.Spawn(pb.SpawnRequest(runtime_id=rid, agent=agent), timeout=5, metadata=meta).handle
    stub.Wake(pb.WakeRequest(runtime_id=rid, handle=handle, prompt="go"), timeout=5, metadata=meta)
    if wait:
        result = stub.Wait(pb.WaitRequest(runtime_id=rid, handle=handle, timeout_ms=10_000), timeout=15,
                           metadata=meta)
        assert result.status == "pending", result
    return handle


def _key(key: str) -> tuple[tuple[str, str], ...]:
    return ((KEY_HEADER, key),) if key else ()


def pages(stub: pb_grpc.AgentRuntimeStub, request: pb.ListPendingRequest,
          key: str = "") -> Iterator[pb.ListPendingResponse]:
    for _ in range(100):
        page = stub.ListPending(request, timeout=5, metadata=_key(key))
        yield page
        if not page.next_page_token:
            return
        request.page_token = page.next_page_token
    raise AssertionError("ListPending never reached its last page")


def listed(stub: pb_grpc.AgentRuntimeStub, key: str = "", **filters: object) -> list[pb.PendingItem]:
    return [i for p in pages(stub, pb.ListPendingRequest(**filters), key) for i in p.items]  # type: ignore[arg-type]


def test_list_pending_pages_oldest_first_with_every_field(stub: pb_grpc.AgentRuntimeStub,
                                                          server: ScriptedModelServer) -> None:
    """Three suspensions of one runtime come oldest first, two to a page, each naming its request,
    runtime, leaf and top-level handle, agent and time; a filter by kind finds the other runtime's."""
    rid = new_runtime(stub, server)
    handles = [park(stub, rid) for _ in range(3)]
    other = new_runtime(stub, server)
    asker = park(stub, other, agent="asker")

    first = stub.ListPending(pb.ListPendingRequest(runtime_id=rid, page_size=2), timeout=5)
    assert [i.handle for i in first.items] == handles[:2] and first.next_page_token
    second = pb.ListPendingRequest(runtime_id=rid, page_size=2, page_token=first.next_page_token)
    rest = stub.ListPending(second, timeout=5)
    assert [i.handle for i in rest.items] == handles[2:] and not rest.next_page_token
    item = first.items[0]
    snap = stub.Snapshot(pb.SnapshotRequest(runtime_id=rid, handle=handles[0]), timeout=5)
    assert (item.runtime_id, item.top_handle, item.agent) == (rid, handles[0], "approver")
    assert not item.expires_at
    assert (item.request.id, item.request.kind) == (snap.pending.id, "approval")
    assert item.request.prompt == "approve?"
    assert item.created_at.endswith("Z") and item.created_at <= rest.items[0].created_at

    inputs = [i for i in listed(stub, kind="input") if i.runtime_id == other]
    assert [(i.handle, i.request.kind, i.agent) for i in inputs] == [(asker, "input", "asker")]
    everywhere = [(i.runtime_id, i.handle) for i in listed(stub, page_size=1) if i.runtime_id in (rid, other)]
    assert everywhere == [(rid, h) for h in handles] + [(other, asker)]
    times = [i.created_at for i in listed(stub)]
    assert times == sorted(times)


def test_age_filters_and_answers_shrink_the_list(stub: pb_grpc.AgentRuntimeStub,
                                                 server: ScriptedModelServer) -> None:
    """``min_age_ms`` hides what is younger, ``max_age_ms`` what is older; an answered suspension leaves."""
    rid = new_runtime(stub, server)
    old, young = park(stub, rid), None
    time.sleep(0.6)
    young = park(stub, rid)
    handles = lambda **f: [i.handle for i in listed(stub, runtime_id=rid, **f)]  # noqa: E731
    assert handles(min_age_ms=400) == [old]
    assert handles(max_age_ms=400) == [young]
    assert handles(min_age_ms=3_600_000) == []
    pending_id = stub.Snapshot(pb.SnapshotRequest(runtime_id=rid, handle=old), timeout=5).pending.id
    stub.Resume(pb.ResumeRequest(runtime_id=rid, answer=pb.Answer(id=pending_id, ok=True)), timeout=15)
    assert handles() == [young]


@pytest.mark.parametrize(("request_", "code", "says"), [
    (pb.ListPendingRequest(page_token="not-a-token"), grpc.StatusCode.INVALID_ARGUMENT, "page_token"),
    (pb.ListPendingRequest(page_token="WyJwIiwxLCIiLCJ4Il0"), grpc.StatusCode.INVALID_ARGUMENT, "page_token"),
    (pb.ListPendingRequest(page_size=-1), grpc.StatusCode.INVALID_ARGUMENT, "page_size"),
    (pb.ListPendingRequest(min_age_ms=-5), grpc.StatusCode.INVALID_ARGUMENT, "min_age_ms"),
    (pb.ListPendingRequest(min_age_ms=10, max_age_ms=5), grpc.StatusCode.INVALID_ARGUMENT, "below"),
    (pb.ListPendingRequest(kind="x" * 300), grpc.StatusCode.INVALID_ARGUMENT, "kind"),
    (pb.ListPendingRequest(runtime_id="no-such-runtime"), grpc.StatusCode.NOT_FOUND, "no-such-runtime"),
    (pb.ListRuntimesRequest(page_token="%%%"), grpc.StatusCode.INVALID_ARGUMENT, "page_token"),
    (pb.ListRuntimesRequest(page_size=-2), grpc.StatusCode.INVALID_ARGUMENT, "page_size"),
    (pb.WatchPendingRequest(runtime_id="no-such-runtime"), grpc.StatusCode.NOT_FOUND, "no-such-runtime"),
    (pb.WatchPendingRequest(kind="\x00"), grpc.StatusCode.INVALID_ARGUMENT, "kind"),
], ids=["garbage-token", "token-of-empty-id", "negative-page", "negative-age", "empty-window", "long-kind",
        "unknown-runtime", "runtimes-token", "runtimes-page", "watch-unknown", "watch-kind"])
def test_bad_requests_get_a_precise_status(stub: pb_grpc.AgentRuntimeStub, request_: object,
                                           code: grpc.StatusCode, says: str) -> None:
    if isinstance(request_, pb.ListPendingRequest):
        call = lambda: stub.ListPending(request_, timeout=5)  # noqa: E731
    elif isinstance(request_, pb.ListRuntimesRequest):
        call = lambda: stub.ListRuntimes(request_, timeout=5)  # noqa: E731
    else:
        call = lambda: next(iter(stub.WatchPending(request_, timeout=5)))  # noqa: E731
    got, details = code_of(call)
    assert got is code and says in details, details
    assert stub.ListRuntimes(pb.ListRuntimesRequest(page_size=5000), timeout=5) is not None  # still serving


def test_keyed_runtimes_are_listed_only_to_holders_of_the_key(stub: pb_grpc.AgentRuntimeStub,
                                                              server: ScriptedModelServer) -> None:
    """Without the key a protected runtime's suspensions and summary are not shown (and naming it is
    PERMISSION_DENIED); with it they are, marked ``keyed``."""
    key = "s3cret-key"
    rid = new_runtime(stub, server, key=key)
    handle = park(stub, rid, key=key)
    assert rid not in {i.runtime_id for i in listed(stub)}
    assert rid not in {r.runtime_id for r in all_runtimes(stub)}
    code, _ = code_of(lambda: stub.ListPending(pb.ListPendingRequest(runtime_id=rid), timeout=5))
    assert code is grpc.StatusCode.PERMISSION_DENIED
    code, _ = code_of(lambda: stub.ListPending(pb.ListPendingRequest(runtime_id=rid), timeout=5,
                                               metadata=_key("wrong")))
    assert code is grpc.StatusCode.PERMISSION_DENIED

    assert [i.handle for i in listed(stub, key=key) if i.runtime_id == rid] == [handle]
    mine = [r for r in all_runtimes(stub, key) if r.runtime_id == rid]
    assert len(mine) == 1 and mine[0].keyed and mine[0].pending == 1

    watch = stub.WatchPending(pb.WatchPendingRequest(), timeout=10)
    try:
        seen = until_synced(watch)
        assert rid not in {c.item.runtime_id for c in seen}
    finally:
        watch.cancel()
    watch = stub.WatchPending(pb.WatchPendingRequest(runtime_id=rid), timeout=10, metadata=_key(key))
    try:
        assert [c.item.handle for c in until_synced(watch)] == [handle]
    finally:
        watch.cancel()


def all_runtimes(stub: pb_grpc.AgentRuntimeStub, key: str = "") -> list[pb.RuntimeSummary]:
    out: list[pb.RuntimeSummary] = []
    request = pb.ListRuntimesRequest(page_size=2)
    for _ in range(500):
        page = stub.ListRuntimes(request, timeout=5, metadata=_key(key))
        out.extend(page.runtimes)
        if not page.next_page_token:
            return out
        request.page_token = page.next_page_token
    raise AssertionError("ListRuntimes never reached its last page")


def test_list_runtimes_counts_handles_by_state_and_pages(stub: pb_grpc.AgentRuntimeStub,
                                                         server: ScriptedModelServer) -> None:
    rid = new_runtime(stub, server)
    park(stub, rid)
    park(stub, rid)
    stub.Spawn(pb.SpawnRequest(runtime_id=rid, agent="approver"), timeout=5)
    runtimes = all_runtimes(stub)
    ids = [r.runtime_id for r in runtimes]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    mine = next(r for r in runtimes if r.runtime_id == rid)
    assert dict(mine.handles) == {"suspended": 2, "idle": 1}
    assert (mine.pending, mine.keyed) == (2, False) and mine.created_at.endswith("Z")


def until_synced(watch: Iterator[pb.PendingChange]) -> list[pb.PendingChange]:
    """The ADDED changes a WatchPending stream opens with, up to its SYNCED."""
    out = []
    for change in watch:
        if change.type == "SYNCED":
            return out
        assert change.type == "ADDED", change
        out.append(change)
    raise AssertionError("the stream ended before SYNCED")


def test_watch_pending_lists_then_follows_with_reasons(stub: pb_grpc.AgentRuntimeStub,
                                                       server: ScriptedModelServer) -> None:
    """ADDED for each open suspension, SYNCED, then live ADDED and REMOVED (answered, cancelled,
    closed, expired); a reconnect starts over with the full list."""
    rid = new_runtime(stub, server)
    a, b = park(stub, rid), park(stub, rid)
    watch = stub.WatchPending(pb.WatchPendingRequest(runtime_id=rid), timeout=30)
    try:
        assert [c.item.handle for c in until_synced(watch)] == [a, b]
        c = park(stub, rid, wait=False)
        added = next(watch)
        assert (added.type, added.item.handle, added.item.request.kind) == ("ADDED", c, "approval")

        answer = pb.Answer(id=added.item.request.id, ok=True)
        stub.Resume(pb.ResumeRequest(runtime_id=rid, answer=answer), timeout=15)
        assert removal(next(watch)) == (c, "answered")
        stub.Interrupt(pb.InterruptRequest(runtime_id=rid, handle=a), timeout=5)
        assert removal(next(watch)) == (a, "cancelled")
        stub.Close(pb.CloseRequest(runtime_id=rid, handle=b), timeout=5)
        assert removal(next(watch)) == (b, "closed")

        d = park(stub, rid, agent="asker")
        asked = next(watch)
        assert (asked.type, asked.item.handle, asked.item.request.kind) == ("ADDED", d, "input")
        e = park(stub, rid)
        assert next(watch).item.handle == e
        late = pb.Answer(id=stub.Snapshot(pb.SnapshotRequest(runtime_id=rid, handle=e), timeout=5).pending.id,
                         ok=False, reason="expired")  # what a deadline that fires answers
        stub.Resume(pb.ResumeRequest(runtime_id=rid, answer=late, no_wait=True), timeout=15)
        assert removal(next(watch)) == (e, "expired")
    finally:
        watch.cancel()
    again = stub.WatchPending(pb.WatchPendingRequest(runtime_id=rid), timeout=30)
    try:
        assert [ch.item.handle for ch in until_synced(again)] == [d]
    finally:
        again.cancel()
    kinds = stub.WatchPending(pb.WatchPendingRequest(runtime_id=rid, kind="approval"), timeout=30)
    try:
        assert until_synced(kinds) == []
    finally:
        kinds.cancel()


def removal(change: pb.PendingChange) -> tuple[str, str]:
    assert change.type == "REMOVED", change
    return change.item.handle, change.reason


def test_the_daemon_token_guards_all_three(tmp_path: Path) -> None:
    """Without ``authorization: Bearer <token>`` each is UNAUTHENTICATED; with it each answers."""
    proc = DaemonProcess(tmp_path / "data", "--auth-token-env", "TND_PENDING_TOKEN",
                         env={"TND_PENDING_TOKEN": "pending-t0ken"})
    try:
        channel, stub = open_stub(proc.start().target)
        with channel:
            calls = {"ListPending": lambda meta: stub.ListPending(pb.ListPendingRequest(), metadata=meta,
                                                                 timeout=5),
                     "ListRuntimes": lambda meta: stub.ListRuntimes(pb.ListRuntimesRequest(), metadata=meta,
                                                                   timeout=5),
                     "WatchPending": lambda meta: next(iter(stub.WatchPending(pb.WatchPendingRequest(),
                                                                              metadata=meta, timeout=5)))}
            for name, call in calls.items():
                code, _ = code_of(lambda c=call: c((("authorization", "Bearer nope"),)))  # type: ignore[misc]
                assert code is grpc.StatusCode.UNAUTHENTICATED, name
                assert call((("authorization", "Bearer pending-t0ken"),)) is not None, name
    finally:
        proc.stop()
