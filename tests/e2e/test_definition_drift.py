"""Definition drift through a real daemon (docs/protocol.md §11): a worker tool suspends, a reattaching
``New`` changes its definition, and a Resume that upgrades the handle to that new version refuses
until the caller accepts the change (without ``upgrade`` the handle answers on its own version:
tests/e2e/test_versions.py).

Each test suspends a handle on the native tool ``charge`` served by a Python client's worker, then a
second client reattaches to the same runtime with another registry — as an app redeployed while a
person was deciding — and answers. Through the blocking client, the asyncio client and the real
``grpcurl`` binary; the fingerprint is checked to survive a kill -9 of the daemon.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.api.test_grpcurl import SERVICE, _grpcurl_binary
from tests.e2e.test_crash_reattach import free_port, mock_transport
from tests.support.daemon import DaemonProcess
from toolnexus_client import (
    Context,
    DefinitionChange,
    Event,
    FailedPrecondition,
    Registry,
    Runtime,
    Tool,
    ToolResult,
    agent,
    aio,
    registry,
)
from toolnexus_devtools import ScriptedModelServer

AGENT = "cashier"
V1 = {"type": "object", "properties": {"amount": {"type": "number"}, "currency": {"type": "string"}},
      "required": ["amount"]}
V2 = {"type": "object", "properties": {"amount": {"type": "string"}, "memo": {"type": "string"}},
      "required": ["amount", "memo"]}
V1_TO_V2 = "added memo (required); removed currency; retyped amount (number → string)"
SUMMARY = f'tool "charge" input schema changed: {V1_TO_V2}'


def charge(args: dict[str, Any], ctx: Context) -> ToolResult | str:
    if ctx.answer is None:
        return ToolResult.suspend(id=f"charge:{ctx.handle}", kind="approval", prompt="charge the card?")
    return "charged"


def cashier(schema: dict[str, Any] = V1, *, soul: str = "You charge cards.", model: str = "inherit",
            with_charge: bool = True) -> Registry:
    tool = (Tool("charge", input_schema=schema, execute=charge) if with_charge
            else Tool("refund", input_schema={"type": "object", "properties": {}}, execute=lambda a, c: "ok"))
    return registry(agent(AGENT, does="charges cards", uses={"tools": [tool]}, soul=soul, model=model))


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    proc = DaemonProcess(tmp_path_factory.mktemp("drift") / "data").start()
    try:
        yield proc
    finally:
        proc.stop()


def _suspend(target: str) -> tuple[str, str, str]:
    """A runtime with the cashier suspended on ``charge`` (schema V1); the client is gone after."""
    with Runtime.new(target=target, registry=cashier(), transport=mock_transport) as rt:
        handle = rt.spawn(rt.root, AGENT)
        rt.wake(handle, "charge 10 EUR")
        pending = rt.wait(handle, timeout=30).pending
        assert pending is not None
        return rt.id, handle, pending.id


def _reattach(target: str, runtime_id: str, reg: Registry) -> Runtime:
    return Runtime.new(target=target, registry=reg, transport=mock_transport, runtime_id=runtime_id)


def _events(rt: Runtime, until: Callable[[list[Event]], bool]) -> list[Event]:
    """Stored events of ``rt`` until ``until`` holds (bounded: the stream is cancelled after 15 s)."""
    stream = rt.watch(types=["reattach", "resumed"])
    timer = threading.Timer(15, stream.cancel)
    timer.start()
    seen: list[Event] = []
    try:
        for event in stream:
            seen.append(event)
            if until(seen):
                break
    finally:
        timer.cancel()
        stream.cancel()
    return seen


def _drift_events(events: list[Event]) -> list[Event]:
    return [e for e in events if e.type == "reattach" and e.data and "definition_changed" in e.data]


def test_a_changed_schema_is_refused_naming_the_difference_then_accepted(shared: DaemonProcess) -> None:
    rid, handle, req = _suspend(shared.target)
    with _reattach(shared.target, rid, cashier(V2)) as rt:
        assert rt.snapshot(handle).definition_changed == (DefinitionChange(
            part="tool", name="charge", change="schema", summary=SUMMARY, refuses_resume=True,
            added=("memo (required)",), removed=("currency",), retyped=("amount (number → string)",)),)
        expected = (f'tool "charge" changed since request "{req}" suspended: input schema {V1_TO_V2}; resume '
                    "with accept_changed_definition to feed the answer to the new definition")
        for _ in range(2):  # nothing was consumed: the same refusal again, not "already answered"
            with pytest.raises(FailedPrecondition) as refused:
                rt.resume({"id": req, "ok": True}, upgrade=True)
            assert refused.value.message == expected
        snap = rt.snapshot(handle)
        assert snap.state == "suspended" and snap.pending is not None and snap.pending.id == req
        _events(rt, lambda seen: bool(_drift_events(seen)))  # the background report, before the resume
        out = rt.resume({"id": req, "ok": True}, accept_changed_definition=True)
        assert out.result is not None and (out.result.status, out.result.text) == ("done", "charged")
        assert rt.snapshot(handle).definition_changed == ()
        events = _events(rt, lambda seen: seen[-1].type == "resumed")
    drift = _drift_events(events)
    assert len(drift) == 1 and drift[0].handle == handle and drift[0].data is not None
    assert drift[0].data["request_id"] == req
    assert [c["retyped"] for c in drift[0].data["definition_changed"]] == [["amount (number → string)"]]
    assert events[-1].data is not None
    assert events[-1].data["accepted_changed_definition"] == [SUMMARY]


def test_an_unchanged_registry_resumes_as_today(shared: DaemonProcess) -> None:
    rid, handle, req = _suspend(shared.target)
    with _reattach(shared.target, rid, cashier()) as rt:
        assert rt.snapshot(handle).definition_changed == ()
        out = rt.resume({"id": req, "ok": True})
        assert out.result is not None and (out.result.status, out.result.text) == ("done", "charged")
        events = _events(rt, lambda seen: seen[-1].type == "resumed")
    assert _drift_events(events) == []
    assert events[-1].data is not None and "accepted_changed_definition" not in events[-1].data


def test_a_removed_tool_is_refused_naming_the_removal_in_the_asyncio_client(shared: DaemonProcess) -> None:
    rid, handle, req = _suspend(shared.target)

    async def scenario() -> None:
        rt = await aio.Runtime.new(target=shared.target, registry=cashier(with_charge=False),
                                   transport=mock_transport, runtime_id=rid)
        try:
            [change] = (await rt.snapshot(handle)).definition_changed
            assert (change.part, change.name, change.change, change.refuses_resume) == (
                "tool", "charge", "removed", True)
            assert change.summary == 'tool "charge" was removed'
            with pytest.raises(FailedPrecondition) as refused:
                await rt.resume({"id": req, "ok": True}, upgrade=True)
            removed = f'tool "charge" was removed since request "{req}" suspended'
            assert refused.value.message.startswith(removed)
            assert (await rt.snapshot(handle)).state == "suspended"
            out = await rt.resume({"id": req, "ok": True}, accept_changed_definition=True)
            # fed to the registry as it is now: the model reads that the tool is unknown, and answers
            assert out.result is not None and out.result.status == "done"
            assert out.result.text == 'unknown tool "charge" (tools: refund)'
        finally:
            await rt.detach()

    asyncio.run(scenario())


def test_soul_and_model_changes_are_reported_and_resume_proceeds(shared: DaemonProcess) -> None:
    rid, handle, req = _suspend(shared.target)
    with _reattach(shared.target, rid, cashier(soul="You charge cards, politely.", model="bigger")) as rt:
        changed = rt.snapshot(handle).definition_changed
        assert [(c.part, c.name, c.change, c.refuses_resume) for c in changed] == [
            ("soul", AGENT, "changed", False), ("model", AGENT, "changed", False)]
        assert changed[1].summary.endswith("→ bigger")
        # the report is written in the background after New (a deploy answers at once): wait for it,
        # or a resume sent at once may land first
        events = _events(rt, lambda seen: bool(_drift_events(seen)))
        out = rt.resume({"id": req, "ok": True}, upgrade=True)
        assert out.result is not None and (out.result.status, out.result.text) == ("done", "charged")
        assert _events(rt, lambda seen: seen[-1].type == "resumed")[-1].type == "resumed"
    [drift] = _drift_events(events)
    assert drift.data is not None
    assert [c["part"] for c in drift.data["definition_changed"]] == ["soul", "model"]


def test_the_fingerprint_survives_a_daemon_restart(tmp_path: Path) -> None:
    proc = DaemonProcess(tmp_path / "data", listen=(f"127.0.0.1:{free_port()}",)).start()
    try:
        rid, handle, req = _suspend(proc.target)
        proc.kill9()
        proc.start()
        with _reattach(proc.target, rid, cashier(V2)) as rt:
            assert [c.change for c in rt.snapshot(handle).definition_changed] == ["schema"]
            with pytest.raises(FailedPrecondition, match=f'tool "charge" changed since request "{req}"'):
                rt.resume({"id": req, "ok": True}, upgrade=True)
            out = rt.resume({"id": req, "ok": True}, accept_changed_definition=True)
            assert out.result is not None and out.result.text == "charged"
    finally:
        proc.stop()


# ------------------------------------------------------------------ grpcurl


def _grpcurl(daemon: DaemonProcess, method: str, body: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    cmd = [_grpcurl_binary(), "-plaintext", "-max-time", "15", "-d", json.dumps(body), daemon.target,
           f"{SERVICE}/{method}"]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=30)


def _ok(daemon: DaemonProcess, method: str, body: dict[str, Any]) -> Any:
    proc = _grpcurl(daemon, method, body)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_grpcurl_sees_the_drift_is_refused_and_accepts_it(shared: DaemonProcess) -> None:
    """The approval webhook suspends; New with a changed schema reattaches; Resume as JSON."""
    with ScriptedModelServer() as model:
        def new(schema: dict[str, Any], runtime_id: str = "") -> Any:
            tool = {"name": "approve", "source": "webhook", "input_schema": schema,
                    "http": {"url": model.approval_url}}
            llm = {"style": "openai", "base_url": model.url, "model": "scripted"}
            return _ok(shared, "New", {"runtime_id": runtime_id, "llm": llm,
                                       "agents": [{"name": "approver", "does": "asks", "tools": [tool]}]})

        rid = new(V1)["runtime_id"]
        handle = _ok(shared, "Spawn", {"runtime_id": rid, "agent": "approver"})["handle"]
        _ok(shared, "Wake", {"runtime_id": rid, "handle": handle, "prompt": "please"})
        req = _ok(shared, "Wait", {"runtime_id": rid, "handle": handle, "timeout_ms": 10000})["pending"]["id"]
        assert new(V2, rid)["reattached"]
        [change] = _ok(shared, "Snapshot", {"runtime_id": rid, "handle": handle})["definition_changed"]
        assert (change["part"], change["change"], change["refuses_resume"]) == ("tool", "schema", True)
        assert change["removed"] == ["currency"] and change["retyped"] == ["amount (number → string)"]

        refused = _grpcurl(shared, "Resume", {"runtime_id": rid, "answer": {"id": req, "ok": True},
                                              "upgrade": True})
        assert refused.returncode != 0
        assert "FailedPrecondition" in refused.stderr
        assert f'tool "approve" changed since request "{req}" suspended' in refused.stderr
        resumed = _ok(shared, "Resume", {"runtime_id": rid, "answer": {"id": req, "ok": True},
                                         "accept_changed_definition": True})
        assert (resumed["result"]["status"], resumed["result"]["text"]) == ("done", "action performed")
