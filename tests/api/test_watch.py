"""Watch: stored events replay from any seq, across a daemon restart, and flow on live without a gap."""

from __future__ import annotations

import threading
from collections.abc import Callable

import grpc
import pytest

from tests.support.daemon import DaemonProcess
from tests.support.grpc_client import approval_agent, open_stub, openai_llm
from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_daemon.api._gen import runtime_pb2_grpc as pb_grpc
from toolnexus_devtools import ScriptedModelServer

Until = Callable[[pb.Event], bool]


def _collect(call: grpc.Future, until: Until) -> list[pb.Event]:
    """Events from a Watch stream up to and including the first one ``until`` accepts."""
    events: list[pb.Event] = []
    for event in call:
        events.append(event)
        if until(event):
            break
    call.cancel()
    return events


def _is_pending(ev: pb.Event) -> bool:
    return ev.type == "pending"


def _is_done(ev: pb.Event) -> bool:
    return ev.type == "result" and ev.result.status == "done"


def _suspend(stub: pb_grpc.AgentRuntimeStub, model: ScriptedModelServer) -> tuple[str, str]:
    new = pb.NewRequest(agents=[approval_agent("approver", model.approval_url)], llm=openai_llm(model.url))
    rid = stub.New(new, timeout=5).runtime_id
    handle = stub.Spawn(pb.SpawnRequest(runtime_id=rid, agent="approver"), timeout=5).handle
    stub.Wake(pb.WakeRequest(runtime_id=rid, handle=handle, prompt="go"), timeout=5)
    return rid, handle


@pytest.mark.parametrize("stop", ["sigterm", "kill9"])
def test_watch_replays_across_a_restart_without_gap_or_duplicate(
        own_daemon: DaemonProcess, model: ScriptedModelServer, stop: str) -> None:
    """Replay from the middle of the log after a restart, then live events of the Resume, seq by seq."""
    channel, stub = open_stub(own_daemon.start().target)
    with channel:
        rid, handle = _suspend(stub, model)
        before = _collect(stub.Watch(pb.WatchRequest(runtime_id=rid), timeout=15), _is_pending)
        request_id = before[-1].pending.id
    assert [e.seq for e in before] == list(range(1, len(before) + 1))
    assert all(e.at.endswith("Z") for e in before)

    own_daemon.stop() if stop == "sigterm" else own_daemon.kill9()
    channel, stub = open_stub(own_daemon.start().target)
    with channel:
        middle = len(before) // 2
        watch = stub.Watch(pb.WatchRequest(runtime_id=rid, after_seq=middle), timeout=15)
        after: list[pb.Event] = []
        reader = threading.Thread(target=lambda: after.extend(_collect(watch, _is_done)))
        reader.start()
        answer = pb.Answer(id=request_id, ok=True)
        resumed = stub.Resume(pb.ResumeRequest(runtime_id=rid, answer=answer), timeout=15)
        assert resumed.result.status == "done"
        reader.join(15)
    seqs = [e.seq for e in after]
    assert seqs == list(range(middle + 1, middle + 1 + len(after))), seqs
    assert seqs[-1] > len(before), "the live events of the Resume followed the replay"
    replayed = after[: len(before) - middle]
    assert [(e.type, e.note) for e in replayed] == [(e.type, e.note) for e in before[middle:]]
    assert {e.handle for e in after if e.type == "transition"} == {handle}


def test_watch_filters_by_type_and_handle(stub: pb_grpc.AgentRuntimeStub, model: ScriptedModelServer) -> None:
    rid, handle = _suspend(stub, model)
    request = pb.WatchRequest(runtime_id=rid, types=["transition", "pending"], handle=handle)
    events = _collect(stub.Watch(request, timeout=15), _is_pending)
    assert {e.type for e in events} == {"transition", "pending"}
    assert {e.handle for e in events} == {handle}
    transitions = [(e.from_state, e.to_state) for e in events if e.type == "transition"]
    assert transitions[0] == ("idle", "running") and transitions[-1] == ("running", "suspended")


def test_watch_of_an_unknown_handle_is_not_found(stub: pb_grpc.AgentRuntimeStub,
                                                 model: ScriptedModelServer) -> None:
    rid, _ = _suspend(stub, model)
    with pytest.raises(grpc.RpcError) as err:
        list(stub.Watch(pb.WatchRequest(runtime_id=rid, handle="root/ghost.9"), timeout=5))
    assert err.value.code() is grpc.StatusCode.NOT_FOUND
