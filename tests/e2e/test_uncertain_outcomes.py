"""Calls in flight at a kill -9 of the daemon (docs/protocol.md §11 Uncertain outcomes).

A real daemon, a scripted model over HTTP, and a ``charge`` tool that is slow the first time:
a native tool served by this process's worker stream, or a webhook on a real HTTP server on
127.0.0.1. The daemon is killed with SIGKILL while every call is running. With
``on_crash="ask"`` the restarted daemon sends nothing again: each handle suspends on a
``reconcile`` request about its own call, and the three answers do what they say — an output
is recorded as the call's result, ``ok`` alone runs the call again with the same ``call_id``,
a decline records ``not completed: charge``. With ``on_crash="rerun"`` the call is sent again
with the same ``call_id`` and no one is asked. A worker that drops its stream mid-call makes
the same ``reconcile`` without any crash.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.support.daemon import DaemonProcess
from toolnexus_client import Context, Runtime, Tool, agent, registry
from toolnexus_devtools import ScriptedModelServer
from toolnexus_devtools.model_server import Received, Reply, chat_response, tool_call

AGENT = "payer"
ARGS = {"amount": 5}
SCHEMA = {"type": "object", "properties": {"amount": {"type": "integer"}}}
WEBHOOK_PATH = "/tools/charge"


def charge_script(body: dict[str, Any]) -> dict[str, Any]:
    """Call ``charge`` once, then answer with what it returned."""
    tool_messages = [m for m in body.get("messages") or [] if m.get("role") == "tool"]
    if tool_messages:
        return chat_response(content=str(tool_messages[-1].get("content") or ""), usage=(2, 1, 3))
    return chat_response(tool_calls=[tool_call("charge", ARGS)], usage=(3, 2, 5))


@dataclass
class ChargeService:
    """Every call the tool received, as (handle, call_id, arguments); the first of each call
    blocks until ``release`` (or 60 s), every later one answers at once."""

    calls: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)  # Idempotency-Key headers seen (webhook)
    release: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, handle: str, call_id: str, arguments: dict[str, Any]) -> str:
        with self.lock:
            first = all(c[1] != call_id for c in self.calls)
            self.calls.append((handle, call_id, dict(arguments)))
        if first:
            self.release.wait(60)
            return "charged (late)"
        return f"charged again ({call_id})"

    def native(self, args: dict[str, Any], ctx: Context) -> str:
        return self.record(ctx.handle, ctx.call_id, args)

    def webhook(self, req: Received) -> Reply:
        body = req.json() or {}
        with self.lock:
            self.keys.append(req.headers.get("idempotency-key", ""))
        output = self.record(str(body.get("handle")), str(body.get("call_id")), body.get("arguments") or {})
        return Reply(200, {"output": output})

    def count(self) -> int:
        with self.lock:
            return len(self.calls)


def wait_until(check: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


@pytest.fixture
def service(model_server: ScriptedModelServer) -> Iterator[ChargeService]:
    svc = ChargeService()
    model_server.script = charge_script
    model_server.route(WEBHOOK_PATH, svc.webhook)
    yield svc
    svc.release.set()


def connect(daemon: DaemonProcess, server: ScriptedModelServer, svc: ChargeService, source: str,
            on_crash: str, runtime_id: str | None = None) -> Runtime:
    if source == "native":
        charge = Tool("charge", input_schema=SCHEMA, execute=svc.native, on_crash=on_crash)
    else:
        charge = Tool.webhook("charge", server.origin + WEBHOOK_PATH, input_schema=SCHEMA, on_crash=on_crash)
    llm = {"style": "openai", "base_url": server.url, "model": "scripted"}
    return Runtime.new(target=daemon.target, registry=registry(agent(AGENT, uses={"tools": [charge]})),
                       llm=llm, runtime_id=runtime_id)


def start_calls(rt: Runtime, svc: ChargeService, n: int) -> list[str]:
    handles = [rt.spawn(rt.root, AGENT) for _ in range(n)]
    for h in handles:
        rt.wake(h, "charge 5")
    wait_until(lambda: svc.count() == n, f"{n} calls to reach the tool")
    return handles


def crash_and_restart(daemon: DaemonProcess, rt: Runtime, svc: ChargeService) -> None:
    """kill -9 while every call runs; the old app goes away too; the daemon starts again."""
    daemon.kill9()
    svc.release.set()  # the abandoned first calls may finish now: nobody is there to hear them
    rt.detach()
    daemon.start()


@pytest.mark.parametrize("source", ["native", "webhook"])
def test_ask_tool_in_flight_at_kill9_is_asked_about_and_each_answer_does_what_it_says(
        source: str, daemon: DaemonProcess, model_server: ScriptedModelServer,
        service: ChargeService) -> None:
    """Three calls in flight at kill -9: three reconcile requests; output / rerun / decline."""
    rt = connect(daemon, model_server, service, source, "ask")
    handles = start_calls(rt, service, 3)
    first = {h: cid for h, cid, _ in service.calls}
    crash_and_restart(daemon, rt, service)

    rt = connect(daemon, model_server, service, source, "ask", runtime_id=rt.id)
    try:
        pendings = {}
        for h in handles:
            result = rt.wait(h, timeout=60)
            assert result.status == "pending" and result.pending is not None, result
            pendings[h] = result.pending
        for h, p in pendings.items():
            assert (p.kind, p.prompt) == ("reconcile", "did charge complete?")
            assert p.data is not None
            assert (p.data["call_id"], p.data["tool"], p.data["arguments"]) == (first[h], "charge", ARGS)
            assert rt.snapshot(h).state == "suspended"
        assert service.count() == 3, "nothing was sent again before anyone answered"
        assert len({p.id for p in pendings.values()}) == 3
        announced = rt.watch(types=["pending"])
        kinds = [next(iter(announced)).pending for _ in handles]
        announced.cancel()
        assert sorted(p.id for p in kinds if p is not None) == sorted(p.id for p in pendings.values())

        recorded, rerun, declined = handles
        done = rt.resume({"id": pendings[recorded].id, "ok": True, "data": {"output": "charged 5 (seen)"}})
        assert done.result is not None
        assert (done.result.status, done.result.text) == ("done", "charged 5 (seen)")
        assert service.count() == 3

        done = rt.resume({"id": pendings[rerun].id, "ok": True})
        assert done.result is not None and done.result.status == "done"
        assert done.result.text == f"charged again ({first[rerun]})"
        assert [c[1] for c in service.calls[3:]] == [first[rerun]], "sent again once, with the same call_id"

        done = rt.resume({"id": pendings[declined].id, "ok": False, "reason": "no charge on the card"})
        assert done.result is not None
        assert (done.result.status, done.result.text) == ("done", "not completed: charge")
        assert service.count() == 4
        if source == "webhook":
            assert service.keys == [c[1] for c in service.calls], "Idempotency-Key is the call_id"
    finally:
        rt.detach()


@pytest.mark.parametrize("source", ["native", "webhook"])
def test_rerun_tool_in_flight_at_kill9_is_sent_again_with_the_same_call_id(
        source: str, daemon: DaemonProcess, model_server: ScriptedModelServer,
        service: ChargeService) -> None:
    """The default: after the restart the call is re-dispatched, same call_id, nobody asked."""
    rt = connect(daemon, model_server, service, source, "rerun")
    [h] = start_calls(rt, service, 1)
    call_id = service.calls[0][1]
    crash_and_restart(daemon, rt, service)

    rt = connect(daemon, model_server, service, source, "rerun", runtime_id=rt.id)
    try:
        result = rt.wait(h, timeout=60)
        assert (result.status, result.text) == ("done", f"charged again ({call_id})")
        assert [c[1] for c in service.calls] == [call_id, call_id]
    finally:
        rt.detach()


def test_a_worker_that_drops_its_stream_mid_call_of_an_ask_tool_is_not_sent_it_again(
        daemon: DaemonProcess, model_server: ScriptedModelServer, service: ChargeService) -> None:
    """No crash: the worker's stream breaks while it runs the call; it reconnects at once, yet the
    call is not re-sent — the handle asks. ``ok`` then re-sends it with the same call_id, which
    the worker's call_id cache answers with the first run's outcome: the body ran once."""
    rt = connect(daemon, model_server, service, "native", "ask")
    try:
        [h] = start_calls(rt, service, 1)
        call_id = service.calls[0][1]
        assert rt.worker is not None
        rt.worker.reconnect()
        result = rt.wait(h, timeout=60)
        assert result.status == "pending" and result.pending is not None, result
        assert result.pending.kind == "reconcile" and result.pending.data is not None
        assert result.pending.data["call_id"] == call_id
        rt.worker.wait_welcomed(2, timeout=30)
        assert service.count() == 1, "the reconnected worker was not sent the call again"
        service.release.set()  # the first run finishes; its reply went to the broken stream
        done = rt.resume({"id": result.pending.id, "ok": True})
        assert done.result is not None
        assert (done.result.status, done.result.text) == ("done", "charged (late)")
        assert service.count() == 1, "the same call_id: the worker answered from its cache, not a new run"
    finally:
        service.release.set()
        rt.detach()
