"""Edge faults against a real daemon: concurrent Close, impossible Watch cursors."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from tests.support.daemon import DaemonProcess
from tests.support.grpc_client import Worker, code_of, open_stub, openai_llm
from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_daemon.api._gen import runtime_pb2_grpc as pb_grpc
from toolnexus_devtools import Reply, ScriptedModelServer, chat_response

TALKER = pb.AgentDef(name="talker", does="talks")


@pytest.fixture
def model() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as server:
        yield server


@pytest.fixture
def stub(tmp_path: Path) -> Iterator[pb_grpc.AgentRuntimeStub]:
    with DaemonProcess(tmp_path / "data") as proc:
        channel, client = open_stub(proc.target)
        with channel:
            yield client


def replay(stub: pb_grpc.AgentRuntimeStub, rid: str) -> list[pb.Event]:
    events: list[pb.Event] = []
    try:
        for ev in stub.Watch(pb.WatchRequest(runtime_id=rid, after_seq=0), timeout=1.5):
            events.append(ev)
    except grpc.RpcError as err:
        assert err.code() is grpc.StatusCode.DEADLINE_EXCEEDED, err
    return events


def test_concurrent_closes_of_a_running_handle_make_one_transition(
        stub: pb_grpc.AgentRuntimeStub, model: ScriptedModelServer) -> None:
    model.script = lambda body: Reply(body=chat_response(content="late", usage=(1, 1, 2)), delay=3.0)
    options = pb.RuntimeOptions(close_grace_ms=200)
    rid = stub.New(pb.NewRequest(agents=[TALKER], llm=openai_llm(model.url), options=options),
                   timeout=10).runtime_id
    handle = stub.Spawn(pb.SpawnRequest(runtime_id=rid, agent="talker"), timeout=10).handle
    stub.Wake(pb.WakeRequest(runtime_id=rid, handle=handle, prompt="hi"), timeout=10)
    errors: list[BaseException] = []

    def close() -> None:
        try:
            stub.Close(pb.CloseRequest(runtime_id=rid, handle=handle), timeout=10)
        except grpc.RpcError as err:  # pragma: no cover - asserted empty below
            errors.append(err)

    threads = [threading.Thread(target=close) for _ in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert not errors
    mine = [e for e in replay(stub, rid) if e.handle == handle]
    closed = [e for e in mine if e.type == "closed"]
    into_closed = [e for e in mine if e.type == "transition" and e.to_state == "closed"]
    assert len(closed) == 1 and len(into_closed) == 1, [(e.type, e.from_state, e.to_state) for e in mine]
    assert into_closed[0].from_state == "running"


@pytest.mark.parametrize("after_seq", [2**64 - 1, 2**63, 10_000])
def test_a_watch_cursor_past_the_end_is_refused_naming_the_last_seq(
        stub: pb_grpc.AgentRuntimeStub, model: ScriptedModelServer, after_seq: int) -> None:
    rid = stub.New(pb.NewRequest(agents=[TALKER], llm=openai_llm(model.url)), timeout=10).runtime_id
    last = max(e.seq for e in replay(stub, rid)) if replay(stub, rid) else 0
    code, details = code_of(lambda: list(stub.Watch(pb.WatchRequest(runtime_id=rid, after_seq=after_seq),
                                                    timeout=5)))
    if after_seq >= 2**63:
        assert code is grpc.StatusCode.INVALID_ARGUMENT and "not an event seq" in details, details
    else:
        assert code is grpc.StatusCode.OUT_OF_RANGE and f"(seq {last})" in details, details
        assert f"after_seq <= {last}" in details
    # a cursor at the last seq is fine: it follows
    events = stub.Watch(pb.WatchRequest(runtime_id=rid, after_seq=last), timeout=1)
    with pytest.raises(grpc.RpcError) as err:
        list(events)
    assert err.value.code() is grpc.StatusCode.DEADLINE_EXCEEDED


def _last_user(body: dict) -> str:  # type: ignore[type-arg]
    return str([m for m in body["messages"] if m.get("role") == "user"][-1]["content"])


def test_a_retry_after_longer_than_the_timeout_ends_the_call_at_once(
        stub: pb_grpc.AgentRuntimeStub, model: ScriptedModelServer) -> None:
    refusal = Reply(status=429, body={"error": "slow down"}, headers={"Retry-After": "3600"})
    model.script = lambda body: refusal
    llm = openai_llm(model.url, retries=3, timeout_ms=2000)
    rid = stub.New(pb.NewRequest(agents=[TALKER], llm=llm), timeout=10).runtime_id
    handle = stub.Spawn(pb.SpawnRequest(runtime_id=rid, agent="talker"), timeout=10).handle
    stub.Wake(pb.WakeRequest(runtime_id=rid, handle=handle, prompt="hi"), timeout=10)
    result = stub.Wait(pb.WaitRequest(runtime_id=rid, handle=handle, timeout_ms=10_000), timeout=20)
    assert result.status == "error" and "asks to wait 3600s" in result.text, result
    assert "llm.timeout_ms (2000 ms)" in result.text and model.calls == 1


def test_a_turn_waiting_to_retry_gives_its_slot_to_another_handle(
        stub: pb_grpc.AgentRuntimeStub, model: ScriptedModelServer) -> None:
    asked: list[str] = []

    def script(body: dict) -> Reply:  # type: ignore[type-arg]
        prompt = _last_user(body)
        asked.append(prompt)
        if prompt == "a" and asked.count("a") == 1:
            return Reply(status=429, body={"error": "later"}, headers={"Retry-After": "2"})
        return Reply(body=chat_response(content=f"answer {prompt}", usage=(1, 1, 2)))

    model.script = script
    options = pb.RuntimeOptions(max_concurrent_turns=1)
    llm = openai_llm(model.url, retries=2, timeout_ms=5000)
    rid = stub.New(pb.NewRequest(agents=[TALKER], llm=llm, options=options), timeout=10).runtime_id
    first, second = (stub.Spawn(pb.SpawnRequest(runtime_id=rid, agent="talker"), timeout=10).handle
                     for _ in range(2))
    stub.Wake(pb.WakeRequest(runtime_id=rid, handle=first, prompt="a"), timeout=10)
    deadline = 50
    while not asked and deadline:
        threading.Event().wait(0.05)
        deadline -= 1
    stub.Wake(pb.WakeRequest(runtime_id=rid, handle=second, prompt="b"), timeout=10)
    for handle, text in ((second, "answer b"), (first, "answer a")):
        result = stub.Wait(pb.WaitRequest(runtime_id=rid, handle=handle, timeout_ms=10_000), timeout=20)
        assert (result.status, result.text) == ("done", text), result
    assert asked == ["a", "b", "a"]  # b ran while a waited out its Retry-After


def test_a_worker_that_takes_a_call_and_never_replies_is_bounded_by_the_tools_deadline(
        stub: pb_grpc.AgentRuntimeStub, model: ScriptedModelServer) -> None:
    hang = pb.ToolDef(name="hang", source="native", deadline_ms=500)
    agent = pb.AgentDef(name="user", does="uses hang", tools=[hang])
    rid = stub.New(pb.NewRequest(agents=[agent], llm=openai_llm(model.url)), timeout=10).runtime_id
    worker = Worker(stub, rid)  # takes every tool call, answers none
    try:
        handle = stub.Spawn(pb.SpawnRequest(runtime_id=rid, agent="user"), timeout=10).handle
        stub.Wake(pb.WakeRequest(runtime_id=rid, handle=handle, prompt="go"), timeout=10)
        result = stub.Wait(pb.WaitRequest(runtime_id=rid, handle=handle, timeout_ms=10_000), timeout=20)
        expected = 'tool "hang" did not finish within its deadline of 500 ms'
        assert (result.status, result.text) == ("done", expected)
        assert [m.WhichOneof("msg") for m in worker.received] == ["tool_call"]
    finally:
        worker.close()
