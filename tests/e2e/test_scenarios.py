"""The three reference scenarios through the Python client against a real daemon.

Each runs twice: with llm style ``worker`` (the mock model is a transport in
this process, served over Connect) and with style ``openai`` against the
real scripted HTTP model server. Either way the model is the reference mock:
it calls ``secret_action`` first (usage 3/2/5), then answers with the tool's
output (usage 2/1/3), so exact usage and turn counts are known.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.support.daemon import DaemonProcess
from toolnexus_client import (
    Context,
    Event,
    FailedPrecondition,
    NotFound,
    Request,
    Runtime,
    Tool,
    ToolResult,
    agent,
    registry,
)
from toolnexus_devtools import ScriptedModelServer, mock_model

AGENT = "operator"
PROMPT = "please perform the secret action"


def secret_action(args: dict[str, Any], ctx: Context) -> ToolResult | str:
    if ctx.answer is None:
        return ToolResult.suspend(id=f"secret-action:{ctx.handle}", kind="authorization", prompt="approve?")
    return "action performed"


def mock_transport(request: dict[str, Any]) -> dict[str, Any]:
    return {"status": 200, "headers": {}, "body": mock_model(request["body"])}


REGISTRY = registry(agent(AGENT, does="performs actions that need authorization",
                          uses={"tools": [Tool("secret_action", execute=secret_action)]}))

NewRuntime = Callable[[], Runtime]


@pytest.fixture(params=["worker", "openai"])
def new_runtime(request: pytest.FixtureRequest, daemon: DaemonProcess,
                model_server: ScriptedModelServer) -> Iterator[NewRuntime]:
    """Builds runtimes on the daemon with the model of this parametrization; detaches them after."""
    made: list[Runtime] = []

    def make() -> Runtime:
        if request.param == "worker":
            rt = Runtime.new(target=daemon.target, registry=REGISTRY, transport=mock_transport)
        else:
            llm = {"style": "openai", "base_url": model_server.url, "model": "scripted"}
            rt = Runtime.new(target=daemon.target, registry=REGISTRY, llm=llm)
        made.append(rt)
        return rt

    yield make
    for rt in made:
        rt.detach()


def suspend(rt: Runtime) -> tuple[str, Request]:
    handle = rt.spawn(rt.root, AGENT)
    rt.wake(handle, PROMPT)
    result = rt.wait(handle, timeout=30)
    assert result.status == "pending" and not result.is_error, result
    assert result.pending is not None
    return handle, result.pending


def test_a_suspend_then_resume_ok(new_runtime: NewRuntime) -> None:
    """wait → pending authorization, snapshot suspended; resume ok → idle with 'action performed'."""
    rt = new_runtime()
    handle, pending = suspend(rt)
    assert handle == "root/operator.1"
    assert (pending.id, pending.kind, pending.prompt) == (f"secret-action:{handle}", "authorization",
                                                          "approve?")
    snap = rt.snapshot(handle)
    assert (snap.state, snap.agent, snap.parent) == ("suspended", AGENT, "root")
    assert snap.pending is not None and snap.pending.id == pending.id
    resumed = rt.resume({"id": pending.id, "ok": True})
    assert resumed.handle == handle and not resumed.duplicate
    assert resumed.result is not None and (resumed.result.status, resumed.result.text) == ("done",
                                                                                           "action performed")
    after = rt.snapshot(handle)
    assert after.state == "idle" and after.pending is None
    assert after.last_result is not None and after.last_result.text == "action performed"


def test_b_usage_and_turns_continue_across_the_resume(new_runtime: NewRuntime,
                                                      model_server: ScriptedModelServer) -> None:
    """usage_total grows by the second call only (5 → 8) and turns_total reaches 2: nothing is re-asked."""
    rt = new_runtime()
    handle, pending = suspend(rt)
    before = rt.snapshot(handle)
    assert (before.usage_total, before.turns_total) == (5, 1)
    rt.resume({"id": pending.id, "ok": True})
    after = rt.snapshot(handle)
    assert after.usage_total > before.usage_total and after.turns_total >= 2
    assert (after.usage_total, after.turns_total) == (8, 2)
    assert (after.usage.prompt_tokens, after.usage.completion_tokens) == (5, 3)


def test_c_decline(new_runtime: NewRuntime) -> None:
    """resume ok=False → idle, not an error, text 'declined/expired: approve?'."""
    rt = new_runtime()
    handle, pending = suspend(rt)
    resumed = rt.resume({"id": pending.id, "ok": False, "reason": "not authorized"})
    assert resumed.result is not None and resumed.result.status == "done"
    after = rt.snapshot(handle)
    assert after.state == "idle"
    assert after.last_result is not None and not after.last_result.is_error
    assert after.last_result.text == "declined/expired: approve?"


def test_errors_are_typed_with_the_daemons_message(new_runtime: NewRuntime) -> None:
    """Unknown agent, waking a suspended handle, unknown and conflicting answers: typed errors."""
    rt = new_runtime()
    with pytest.raises(NotFound) as unknown:
        rt.spawn(rt.root, "nope")
    assert unknown.value.message == f'unknown agent "nope" (known: {AGENT})'
    handle, pending = suspend(rt)
    with pytest.raises(FailedPrecondition) as busy:
        rt.wake(handle, "again")
    assert pending.id in busy.value.message
    with pytest.raises(NotFound):
        rt.resume({"id": "no-such-request", "ok": True})
    first = rt.resume({"id": pending.id, "ok": True})
    again = rt.resume({"id": pending.id, "ok": True})
    assert (first.duplicate, again.duplicate) == (False, True)
    with pytest.raises(FailedPrecondition):
        rt.resume({"id": pending.id, "ok": False})


def test_watch_replays_the_whole_story(new_runtime: NewRuntime) -> None:
    """Watch from seq 0 replays gapless events: the durable pending, the resume and the final result."""
    rt = new_runtime()
    handle, pending = suspend(rt)
    rt.resume({"id": pending.id, "ok": True})
    events: list[Event] = []
    stream = rt.watch(after_seq=0)
    watchdog = threading.Timer(20, stream.cancel)  # a missing event fails the asserts below, not the run
    watchdog.start()
    try:
        for event in stream:
            if event.seq:
                events.append(event)
            if event.type == "result" and event.result and event.result.text == "action performed":
                break
    finally:
        watchdog.cancel()
        stream.cancel()
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    mine = [e for e in events if e.handle == handle]
    transitions = [(e.from_state, e.to_state) for e in mine if e.type == "transition"]
    assert ("running", "suspended") in transitions and ("suspended", "idle") in transitions
    assert any(e.type == "pending" and e.pending is not None and e.pending.id == pending.id for e in mine)
    assert any(e.type == "resumed" for e in mine)
    assert mine[-1].type == "result" and mine[-1].result is not None


def test_a_call_redelivered_after_the_stream_broke_runs_once(daemon: DaemonProcess) -> None:
    """A tool call in flight when the worker stream breaks is re-sent with its call_id and not re-run."""
    started, release, runs = threading.Event(), threading.Event(), []

    def slow(args: dict[str, Any], ctx: Context) -> str:
        runs.append(ctx.call_id)
        started.set()
        release.wait(30)
        return "slow done"

    reg = registry(agent("slow", uses={"tools": [Tool("slow_tool", execute=slow)]}))
    with Runtime.new(target=daemon.target, registry=reg, transport=mock_transport) as rt:
        handle = rt.spawn(rt.root, "slow")
        rt.wake(handle, "go")
        assert started.wait(30)
        assert rt.worker is not None
        rt.worker.reconnect()
        rt.worker.wait_welcomed(2, timeout=30)
        release.set()
        result = rt.wait(handle, timeout=60)
    assert (result.status, result.text) == ("done", "slow done")
    assert len(runs) == 1


def test_thin_wrappers_reach_the_daemon(daemon: DaemonProcess) -> None:
    """info, post, list and close each do what their RPC says, seen through snapshot."""
    with Runtime.new(target=daemon.target, registry=REGISTRY, transport=mock_transport) as rt:
        assert rt.info().limits["inbox_cap"] == 8
        handle = rt.spawn(rt.root, AGENT)
        rt.post(handle, "hello", sender="root", channel="note")
        inbox = rt.snapshot(handle).inbox
        assert [(i.sender, i.channel, i.text) for i in inbox] == [("root", "note", "hello")]
        assert [s.id for s in rt.list()] == [handle]
        rt.close(handle)
        assert rt.snapshot(handle).state == "closed"
        with pytest.raises(FailedPrecondition, match="closed"):
            rt.wake(handle, "again")


def test_a_wait_for_resolver_answers_inline(daemon: DaemonProcess) -> None:
    """With wait_for, the client's resolver answers the request inline: no durable suspension."""
    asked: list[Request] = []

    def approve(request: Request) -> dict[str, Any]:
        asked.append(request)
        return {"id": request.id, "ok": True}

    tool = Tool("secret_action", execute=secret_action)
    reg = registry(agent(AGENT, uses={"tools": [tool]}, wait_for=True))
    with Runtime.new(target=daemon.target, registry=reg, transport=mock_transport, wait_for=approve) as rt:
        handle = rt.spawn(rt.root, AGENT)
        rt.wake(handle, PROMPT)
        result = rt.wait(handle, timeout=30)
    assert (result.status, result.text) == ("done", "action performed")
    assert [(r.kind, r.prompt) for r in asked] == [("authorization", "approve?")]
