"""A pending request's ``expires_at`` from a tool is an RFC 3339 time with a time zone, or an error
of that one tool call (docs/protocol.md §10 Deadlines that fire).

``datetime.fromisoformat`` takes far more than RFC 3339 — a bare date, a local time with no zone,
``20261205T1000``, week dates — which the store's PostgreSQL ``timestamptz`` reads otherwise or not
at all, so a deadline would mean different instants to different readers. Through a real daemon:
a webhook tool's body and a native tool's outcome (a Python client's worker over Connect) with
each such value make that call an error the model reads, and the runtime stays healthy — its next
call, with a good deadline, suspends with it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.test_crash_reattach import mock_transport
from tests.support.daemon import DaemonProcess
from tests.support.grpc_client import open_stub, openai_llm
from toolnexus_client import Context, Runtime, Tool, ToolResult, agent, registry
from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_daemon.api._gen import runtime_pb2_grpc as pb_grpc
from toolnexus_devtools import Reply, ScriptedModelServer, chat_response, tool_call

NOT_RFC3339 = {
    "date-only": "2026-12-05",
    "no-zone": "2026-12-05T10:00:00",
    "basic-format": "20261205T1000",
    "week-date": "2026-W49-6T10:00:00Z",
    "no-seconds": "2026-12-05T10:00Z",
    "space-separator": "2026-12-05 10:00:00Z",
    "offset-without-colon": "2026-12-05T10:00:00+0200",
    "hour-25": "2026-12-05T25:00:00Z",
    "leap-second": "2026-12-31T23:59:60Z",
    "trailing-newline": "2026-12-05T10:00:00Z\n",
}
# far in the future: a deadline that has passed would expire the request before Snapshot reads it
GOOD = {"utc": ("2999-12-05T10:00:00Z", "2999-12-05T10:00:00Z"),
        "offset": ("2999-12-05T12:00:00.250+02:00", "2999-12-05T12:00:00.250+02:00"),
        "lower-case": ("2999-12-05t10:00:00z", "2999-12-05T10:00:00Z")}
UNUSABLE = "returned an unusable result: pending.expires_at"


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    proc = DaemonProcess(tmp_path_factory.mktemp("expires") / "data").start()
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def stub(daemon: DaemonProcess) -> Iterator[pb_grpc.AgentRuntimeStub]:
    channel, stub = open_stub(daemon.target)
    yield stub
    channel.close()


def _turn(stub: pb_grpc.AgentRuntimeStub, model: ScriptedModelServer, expires_at: str) -> tuple[
        pb.TaskResult, str, str]:
    """A fresh runtime whose webhook tool suspends with ``expires_at``: (result, runtime, handle)."""
    model.route("/hook", lambda req: Reply(body={"output": "", "pending": {
        "id": "q", "kind": "approval", "prompt": "ok?", "expires_at": expires_at}}))
    hook = pb.ToolDef(name="hook", source="webhook", http=pb.HttpConfig(url=model.origin + "/hook"))
    asker = pb.AgentDef(name="asker", does="asks", tools=[hook])
    new = pb.NewRequest(agents=[asker], llm=openai_llm(model.url))
    rid = stub.New(new, timeout=10).runtime_id
    handle = stub.Spawn(pb.SpawnRequest(runtime_id=rid, agent="asker"), timeout=10).handle
    stub.Wake(pb.WakeRequest(runtime_id=rid, handle=handle, prompt="go"), timeout=10)
    result = stub.Wait(pb.WaitRequest(runtime_id=rid, handle=handle, timeout_ms=20_000), timeout=30)
    return result, rid, handle


def _healthy(stub: pb_grpc.AgentRuntimeStub, model: ScriptedModelServer, rid: str, handle: str) -> None:
    """The runtime reads and runs on: the next call, with a good deadline, suspends with it."""
    model.route("/hook", lambda req: Reply(body={"output": "", "pending": {
        "id": "q2", "kind": "approval", "prompt": "ok?", "expires_at": "2999-01-01T00:00:00Z"}}))
    assert stub.Snapshot(pb.SnapshotRequest(runtime_id=rid, handle="root"), timeout=10).id == "root"
    model.script = _call_the_tool_again
    stub.Wake(pb.WakeRequest(runtime_id=rid, handle=handle, prompt="again"), timeout=10)
    again = stub.Wait(pb.WaitRequest(runtime_id=rid, handle=handle, timeout_ms=20_000), timeout=30)
    assert (again.status, again.pending.expires_at) == ("pending", "2999-01-01T00:00:00Z"), again


def _call_the_tool_again(body: dict[str, Any]) -> dict[str, Any]:
    last = body["messages"][-1]
    if last.get("role") == "tool":
        return chat_response(content=str(last["content"]), usage=(1, 1, 2))
    return chat_response(content="", tool_calls=[tool_call("hook", {})], usage=(1, 1, 2))


@pytest.mark.parametrize("case", list(NOT_RFC3339))
def test_a_webhook_deadline_that_is_not_rfc3339_is_that_calls_error(
        stub: pb_grpc.AgentRuntimeStub, model: ScriptedModelServer, case: str) -> None:
    result, rid, handle = _turn(stub, model, NOT_RFC3339[case])
    assert result.status == "done" and f'tool "hook" {UNUSABLE}' in result.text, result
    assert "with a time zone (like 2026-12-05T10:00:00Z" in result.text
    assert stub.Snapshot(pb.SnapshotRequest(runtime_id=rid, handle=handle), timeout=10).state == "idle"
    _healthy(stub, model, rid, handle)


@pytest.mark.parametrize("case", list(GOOD))
def test_an_rfc3339_deadline_with_a_zone_suspends_with_it(
        stub: pb_grpc.AgentRuntimeStub, model: ScriptedModelServer, case: str) -> None:
    sent, shown = GOOD[case]
    result, rid, handle = _turn(stub, model, sent)
    assert (result.status, result.pending.expires_at) == ("pending", shown), result
    snap = stub.Snapshot(pb.SnapshotRequest(runtime_id=rid, handle=handle), timeout=10)
    assert snap.pending.expires_at == shown


def _native_registry(expires_at: str) -> Any:
    def ask(args: dict[str, Any], ctx: Context) -> ToolResult | str:
        if ctx.answer is None:
            return ToolResult.suspend(id="native-q", kind="approval", prompt="ok?", expires_at=expires_at)
        return "answered"

    return registry(agent("native_asker", does="asks", uses={"tools": [Tool("ask", execute=ask)]}))


@pytest.mark.parametrize("value", [NOT_RFC3339["no-zone"], NOT_RFC3339["basic-format"],
                                   NOT_RFC3339["week-date"]], ids=["no-zone", "basic-format", "week-date"])
def test_a_native_tool_deadline_that_is_not_rfc3339_is_that_calls_error(daemon: DaemonProcess,
                                                                         value: str) -> None:
    with Runtime.new(target=daemon.target, registry=_native_registry(value), transport=mock_transport) as rt:
        handle = rt.spawn(rt.root, "native_asker")
        rt.wake(handle, "go")
        result = rt.wait(handle, timeout=30)
        assert result.status == "done" and f'tool "ask" {UNUSABLE}' in result.text, result
        assert rt.snapshot(rt.root).id == "root"
    good = "2999-01-01T00:00:00+02:00"
    with Runtime.new(target=daemon.target, registry=_native_registry(good), transport=mock_transport) as rt:
        handle = rt.spawn(rt.root, "native_asker")
        rt.wake(handle, "go")
        pending = rt.wait(handle, timeout=30).pending
        assert pending is not None and pending.expires_at == good
