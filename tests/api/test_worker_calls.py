"""Call ids and model calls on the worker channel, over real Connect streams to a real daemon.

A worker may deduplicate on ``call_id``: distinct calls never share one (after a failed or
interrupted turn, after a purge and a ``New`` with the same runtime id), while a redelivery of
the same call — to another worker, or after a restart from the checkpoint — keeps it. Only
the worker holding a call may answer it. A model call served by a worker is bounded by
``llm.timeout_ms`` and moves to another worker when its holder stays silent, and a flood of
replies for calls nobody holds costs a bounded number of log lines.
"""

from __future__ import annotations

import json
import queue
import threading
import time
import uuid
from collections.abc import Callable, Iterator

import grpc

from tests.support.daemon import DaemonProcess
from tests.support.grpc_client import as_dict, native_agent, open_stub, struct, wait_until
from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_daemon.api._gen import runtime_pb2_grpc as pb_grpc
from toolnexus_devtools.model_server import chat_response, mock_model

Respond = Callable[[pb.DaemonMessage], pb.WorkerMessage | None]


def model_reply(msg: pb.DaemonMessage, body: dict[str, object] | None = None, *, status: int = 200,
                error: str = "") -> pb.WorkerMessage:
    """An LlmReply to ``msg``'s model call: the mock model's answer unless ``body`` is given."""
    call = msg.llm_call
    reply = pb.LlmReply(call_id=call.call_id, status=status, error=error,
                        body=struct(body if body is not None else mock_model(as_dict(call.body))))
    return pb.WorkerMessage(llm_reply=reply)


def serve_all(msg: pb.DaemonMessage) -> pb.WorkerMessage | None:
    """Answer model calls with the mock model and tool calls with a fixed output."""
    if msg.WhichOneof("msg") == "llm_call":
        return model_reply(msg)
    return pb.WorkerMessage(tool_outcome=pb.ToolOutcome(call_id=msg.tool_call.call_id, output="looked"))


def silent(msg: pb.DaemonMessage) -> pb.WorkerMessage | None:
    return None


class Stream:
    """A worker's Connect stream on its own thread; ``respond`` answers each call (None: silence)."""

    def __init__(self, stub: pb_grpc.AgentRuntimeStub, runtime_id: str, respond: Respond, *,
                 worker_id: str = "w", llm: bool = True, tools: tuple[str, ...] = ()) -> None:
        self.respond = respond
        self._lock = threading.Lock()
        self._received: list[pb.DaemonMessage] = []
        self._out: queue.Queue[pb.WorkerMessage | None] = queue.Queue()
        hello = pb.WorkerHello(runtime_id=runtime_id, worker_id=worker_id, llm=llm, tools=list(tools))
        self._out.put(pb.WorkerMessage(hello=hello))
        self._welcomed = threading.Event()
        self._call = stub.Connect(self._requests())
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()
        assert self._welcomed.wait(10), "no Welcome from the daemon"

    @property
    def received(self) -> list[pb.DaemonMessage]:
        with self._lock:
            return list(self._received)

    def calls(self, kind: str) -> list[str]:
        """The call ids of the calls of ``kind`` (``llm_call``, ``tool_call``) received so far."""
        return [getattr(m, kind).call_id for m in self.received if m.WhichOneof("msg") == kind]

    def send(self, msg: pb.WorkerMessage) -> None:
        self._out.put(msg)

    def _requests(self) -> Iterator[pb.WorkerMessage]:
        while (msg := self._out.get()) is not None:
            yield msg

    def _serve(self) -> None:
        try:
            for msg in self._call:
                if msg.WhichOneof("msg") == "welcome":
                    self._welcomed.set()
                    continue
                with self._lock:
                    self._received.append(msg)
                reply = self.respond(msg)
                if reply is not None:
                    self._out.put(reply)
        except grpc.RpcError:
            pass  # closed by close() or by the daemon going away

    def close(self) -> None:
        self._out.put(None)
        self._call.cancel()
        self._thread.join(5)


def _runtime(stub: pb_grpc.AgentRuntimeStub, *, runtime_id: str = "", timeout_ms: int = 0, retries: int = 0,
             tool_timeout_ms: int = 10_000) -> str:
    new = pb.NewRequest(runtime_id=runtime_id, agents=[native_agent("looker", "lookup")],
                        llm=pb.LlmConfig(style="worker", timeout_ms=timeout_ms, retries=retries),
                        options=pb.RuntimeOptions(tool_timeout_ms=tool_timeout_ms, max_concurrent_turns=16))
    return str(stub.New(new, timeout=5).runtime_id)


def _spawn(stub: pb_grpc.AgentRuntimeStub, rid: str) -> str:
    return str(stub.Spawn(pb.SpawnRequest(runtime_id=rid, agent="looker"), timeout=5).handle)


def _wake(stub: pb_grpc.AgentRuntimeStub, rid: str, handle: str, prompt: str) -> None:
    stub.Wake(pb.WakeRequest(runtime_id=rid, handle=handle, prompt=prompt), timeout=5)


def _wait(stub: pb_grpc.AgentRuntimeStub, rid: str, handle: str, ms: int = 10_000) -> pb.TaskResult:
    return stub.Wait(pb.WaitRequest(runtime_id=rid, handle=handle, timeout_ms=ms), timeout=ms / 1000 + 5)


# ---------------------------------------------------------------- distinct calls, distinct ids


def test_model_calls_after_an_error_reply_have_new_call_ids(stub: pb_grpc.AgentRuntimeStub) -> None:
    """Three wakes, three prompts: the first two model calls fail, and no two share an id."""
    rid = _runtime(stub)
    handle = _spawn(stub, rid)
    answered = 0

    def respond(msg: pb.DaemonMessage) -> pb.WorkerMessage | None:
        nonlocal answered
        answered += 1
        if answered <= 2:
            return model_reply(msg, {}, error="provider down")
        return serve_all(msg)

    worker = Stream(stub, rid, respond)
    try:
        for prompt in ("first", "second", "third"):
            _wake(stub, rid, handle, prompt)
            result = _wait(stub, rid, handle)
        assert result.status == "done"
    finally:
        worker.close()
    ids = worker.calls("llm_call")
    assert len(ids) == 4 and len(set(ids)) == 4, ids
    prompts = [as_dict(m.llm_call.body)["messages"][-1]["content"] for m in worker.received[:2]]
    assert prompts == ["first", "second"]


def test_a_model_call_after_an_interrupt_has_a_new_call_id(stub: pb_grpc.AgentRuntimeStub) -> None:
    rid = _runtime(stub)
    handle = _spawn(stub, rid)
    worker = Stream(stub, rid, silent)
    try:
        _wake(stub, rid, handle, "first")
        wait_until(lambda: len(worker.calls("llm_call")) == 1)
        stub.Interrupt(pb.InterruptRequest(runtime_id=rid, handle=handle), timeout=5)
        worker.respond = serve_all
        _wake(stub, rid, handle, "second")
        assert _wait(stub, rid, handle).status == "done"
    finally:
        worker.close()
    first, second, *_ = worker.calls("llm_call")
    assert first != second


def test_call_ids_of_a_purged_and_recreated_runtime_are_new(stub: pb_grpc.AgentRuntimeStub) -> None:
    """The same runtime id, the same agent, the same flow (model, tool, model): other ids."""
    rid = f"again-{uuid.uuid4().hex[:8]}"
    seen: list[list[str]] = []
    for round_ in range(2):
        _runtime(stub, runtime_id=rid)
        handle = _spawn(stub, rid)
        worker = Stream(stub, rid, serve_all, tools=("lookup",))
        try:
            _wake(stub, rid, handle, "go")
            result = _wait(stub, rid, handle)
        finally:
            worker.close()
        assert (result.status, result.text) == ("done", "looked"), round_
        seen.append(worker.calls("llm_call") + worker.calls("tool_call"))
        stub.Shutdown(pb.ShutdownRequest(runtime_id=rid, purge=True), timeout=5)
    assert len(seen[0]) == 3 and not set(seen[0]) & set(seen[1]), seen
    for ids in seen:  # readable and bounded: runtime, handle, turn tag, call
        assert all(i.startswith(f"{rid}/root/") and len(i) < len(rid) + 40 for i in ids), ids


def test_a_model_call_keeps_its_id_across_a_restart(own_daemon: DaemonProcess) -> None:
    """The daemon dies while a worker holds a model call; after the restart the call is re-issued
    from the checkpoint with the same call_id (a worker may answer it from its cache)."""
    own_daemon.start()
    channel, stub = open_stub(own_daemon.target)
    rid = _runtime(stub)
    handle = _spawn(stub, rid)
    worker = Stream(stub, rid, silent)
    _wake(stub, rid, handle, "go")  # returns once the wake (and its checkpoint) is durable
    wait_until(lambda: len(worker.calls("llm_call")) == 1)
    own_daemon.kill9()
    worker.close()
    channel.close()
    own_daemon.start()
    channel, stub = open_stub(own_daemon.target)
    again = Stream(stub, rid, serve_all, tools=("lookup",))
    try:
        assert _wait(stub, rid, handle).status == "done"
    finally:
        again.close()
        channel.close()
    assert again.calls("llm_call")[0] == worker.calls("llm_call")[0]


# ---------------------------------------------------------------- only the holder answers


def test_only_the_worker_holding_a_call_may_answer_it(stub: pb_grpc.AgentRuntimeStub) -> None:
    rid = _runtime(stub)
    handle = _spawn(stub, rid)
    a = Stream(stub, rid, silent, worker_id="a")
    b = Stream(stub, rid, silent, worker_id="b")
    try:
        _wake(stub, rid, handle, "go")
        wait_until(lambda: len(a.calls("llm_call") + b.calls("llm_call")) == 1)
        holder, other = (a, b) if a.calls("llm_call") else (b, a)
        [msg] = holder.received
        other.send(model_reply(msg, chat_response("forged")))
        time.sleep(0.3)
        snap = stub.Snapshot(pb.SnapshotRequest(runtime_id=rid, handle=handle), timeout=5)
        assert snap.state == "running", "a worker that does not hold the call answered it"
        holder.send(model_reply(msg, chat_response("genuine")))
        result = _wait(stub, rid, handle)
    finally:
        a.close()
        b.close()
    assert (result.status, result.text) == ("done", "genuine")


# ---------------------------------------------------------------- model-call timeouts


def test_a_silent_worker_cannot_hold_model_calls_past_the_timeout(stub: pb_grpc.AgentRuntimeStub) -> None:
    """One silent and one answering worker: every handle finishes, each timed-out call moving to
    the answering worker with its id, and a late answer from the silent one changes nothing."""
    rid = _runtime(stub, timeout_ms=400, retries=2)
    handles = [_spawn(stub, rid) for _ in range(6)]
    quiet = Stream(stub, rid, silent, worker_id="quiet")
    talker = Stream(stub, rid, lambda m: model_reply(m, chat_response("answered")), worker_id="talker")
    try:
        started = time.monotonic()
        for h in handles:
            _wake(stub, rid, h, "go")
        results = [_wait(stub, rid, h, ms=8_000) for h in handles]
        elapsed = time.monotonic() - started
        assert [(r.status, r.text) for r in results] == [("done", "answered")] * len(handles)
        assert elapsed < 10, f"took {elapsed:.1f}s"  # about 1 s unloaded: 400 ms silence, one backoff
        stuck = quiet.calls("llm_call")
        assert stuck, "round robin gave the silent worker no call: the test proves nothing"
        assert set(stuck) <= set(talker.calls("llm_call")), "a timed-out call is re-sent with its id"
        for msg in quiet.received:  # too late: the call was taken from it
            quiet.send(model_reply(msg, chat_response("late")))
        time.sleep(0.3)
        assert [_wait(stub, rid, h).text for h in handles] == ["answered"] * len(handles)
    finally:
        quiet.close()
        talker.close()


def test_a_lone_silent_worker_ends_the_turn_with_the_model_timeout(stub: pb_grpc.AgentRuntimeStub) -> None:
    rid = _runtime(stub, timeout_ms=300, retries=1)
    handle = _spawn(stub, rid)
    quiet = Stream(stub, rid, silent)
    try:
        _wake(stub, rid, handle, "go")
        result = _wait(stub, rid, handle, ms=8_000)
    finally:
        quiet.close()
    assert (result.status, result.is_error) == ("error", True)
    assert result.text.startswith("model call failed after 2 attempts: timeout after 300 ms"), result.text
    ids = quiet.calls("llm_call")
    assert len(ids) == 2 and len(set(ids)) == 1, "the second attempt is a redelivery of the same call"


# ---------------------------------------------------------------- the log under a flood


def test_a_flood_of_replies_for_unknown_calls_logs_a_bounded_number_of_lines(
        daemon: DaemonProcess, stub: pb_grpc.AgentRuntimeStub) -> None:
    rid = _runtime(stub)
    worker = Stream(stub, rid, silent, worker_id="flooder")
    flood = 10_000
    nan = struct({"x": float("nan")})  # a reply the daemon refuses (NaN), for no call either
    try:
        for i in range(flood):
            reply = pb.LlmReply(call_id=f"{rid}/root/m{i}", status=200, body=nan if i % 10 == 0 else None)
            worker.send(pb.WorkerMessage(llm_reply=reply))
        # the stream is read in order: once this second hello is logged, the flood was read
        worker.send(pb.WorkerMessage(hello=pb.WorkerHello(runtime_id=rid, worker_id="flooder", llm=True)))
        wait_until(lambda: any("second hello" in x and rid in x for x in daemon.log_lines), 60)
    finally:
        worker.close()
    wait_until(lambda: any("worker disconnected" in x and rid in x for x in daemon.log_lines), 10)
    about = [json.loads(x) for x in daemon.log_lines if rid in x]
    assert len(about) < 30, f"{len(about)} log lines about one worker's {flood} unknown replies"
    counted = [line for line in about if "ignored replies" in line["msg"]]
    refused = [line for line in about if "ignored refused" in line["msg"]]
    assert sum(int(line["count"]) for line in counted) == flood - flood // 10
    assert sum(int(line["count"]) for line in refused) == flood // 10

