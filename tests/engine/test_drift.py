"""Definition drift in the engine: the fingerprint a durable suspension records, what Resume refuses
and what Snapshot and the event log report after a reattach (docs/protocol.md §11)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from toolnexus_daemon.clock import ManualClock
from toolnexus_daemon.engine.definitions.fingerprint import Fingerprint, soul_digest
from toolnexus_daemon.engine.state.change import Change
from toolnexus_daemon.engine.state.checkpoint import Checkpoint
from toolnexus_daemon.engine.verbs.engine import Engine
from toolnexus_daemon.engine.verbs.runtime import Runtime
from toolnexus_daemon.errors import DataLoss, FailedPrecondition
from toolnexus_daemon.model import (
    AgentDef,
    Answer,
    EventType,
    HandleState,
    McpServer,
    RuntimeOptions,
    Status,
    ToolDef,
    ToolSource,
)
from toolnexus_daemon.store import MemoryStore
from toolnexus_devtools import mock_model

from .conftest import LLM, Bench, FunctionTools, ScriptedModel, new_runtime
from .test_nested import COORD, two_level_model
from .test_single_level import secret_action

V1 = {"type": "object", "properties": {"amount": {"type": "number"}, "currency": {"type": "string"}}}
V2 = {"type": "object", "properties": {"amount": {"type": "string"}}}


def cashier(schema: dict = V1, **changes: object) -> AgentDef:  # type: ignore[type-arg]
    tool = ToolDef(name="secret_action", input_schema=schema)
    return replace(AgentDef(name="asker", does="asks", soul="asker", tools=(tool,)), **changes)  # type: ignore[arg-type]


async def _suspended(bench: Bench, rid: str = "d1") -> tuple[Runtime, str, str]:
    bench.model.script = mock_model
    bench.tools.functions["secret_action"] = secret_action
    rt = await new_runtime(bench, rid, cashier())
    h = await rt.spawn("root", "asker")
    await rt.wake(h.id, "go")
    pending = (await rt.wait(h.id, 5000)).pending
    assert pending is not None
    return rt, h.id, pending.id


async def _reattach(bench: Bench, rt: Runtime, *agents: AgentDef) -> None:
    await bench.engine.new(rt.id, list(agents), LLM, rt.options)
    await bench.engine.settle_background()  # the reattach events are written after New returns


async def test_a_durable_suspension_fingerprints_tool_schema_soul_and_model(bench: Bench) -> None:
    rt, h, _ = await _suspended(bench)
    cp = rt.snapshot(h).cp
    assert cp is not None
    assert cp.fingerprint == Fingerprint(soul=soul_digest("asker"), model="scripted", tool="secret_action",
                                         schema=V1)
    stored = bench.store.get_checkpoint(rt.id, h)
    assert stored is not None and Checkpoint.from_json(stored).fingerprint == cp.fingerprint


async def test_a_changed_schema_refuses_resume_before_the_answer_is_consumed(bench: Bench) -> None:
    rt, h, req = await _suspended(bench)
    await _reattach(bench, rt, cashier(V2))
    with pytest.raises(FailedPrecondition) as refused:
        await rt.resume(Answer(req, ok=True), upgrade=True)
    assert str(refused.value) == (
        f'tool "secret_action" changed since request "{req}" suspended: input schema removed currency; '
        "retyped amount (number → string); resume with accept_changed_definition to feed the answer to "
        "the new definition")
    entry = rt.requests.get(req)
    assert entry is not None and entry.pending() == [h], "the request is still pending"
    assert rt.snapshot(h).state is HandleState.SUSPENDED
    out = await rt.resume(Answer(req, ok=True), accept_changed_definition=True)
    assert out.result is not None
    assert (out.result.status, out.result.text) == (Status.DONE, "action performed")
    resumed = [e for e in bench.store.events(rt.id, 0, 1000) if e.type is EventType.RESUMED]
    assert resumed[-1].data is not None
    assert resumed[-1].data["accepted_changed_definition"] == [
        'tool "secret_action" input schema changed: removed currency; retyped amount (number → string)']
    assert rt.definition_changed(rt.snapshot(h)) == [], "nothing is reported once the suspension is over"


async def test_a_reattach_writes_one_event_per_difference_it_introduces(bench: Bench) -> None:
    rt, h, req = await _suspended(bench)
    await _reattach(bench, rt, cashier(V1))  # the same registry: nothing to say
    await _reattach(bench, rt, cashier(V2, soul="a new soul"))
    await _reattach(bench, rt, cashier(V2, soul="a new soul"))  # again: nothing new
    drift = [e for e in bench.store.events(rt.id, 0, 1000) if e.type is EventType.REATTACH]
    assert len(drift) == 1 and drift[0].handle == h
    assert drift[0].note == (f'{h}: definition changed while suspended on "{req}" (tool "secret_action" '
                             'input schema changed: removed currency; retyped amount (number → string); '
                             'soul of agent "asker" changed)')
    assert drift[0].data is not None
    assert [c["part"] for c in drift[0].data["definition_changed"]] == ["tool", "soul"]


async def test_soul_and_model_changes_are_reported_not_refused(bench: Bench) -> None:
    rt, h, req = await _suspended(bench)
    await _reattach(bench, rt, cashier(soul="terse", model="other-model"))
    found = rt.definition_changed(rt.snapshot(h))
    assert [(c.part, c.change, c.refuses_resume) for c in found] == [("soul", "changed", False),
                                                                    ("model", "changed", False)]
    assert found[1].summary == 'model of agent "asker" changed: scripted → other-model'
    out = await rt.resume(Answer(req, ok=True))
    assert out.result is not None and out.result.status is Status.DONE


async def test_a_checkpoint_without_a_fingerprint_resumes_as_before(bench: Bench) -> None:
    """A suspension recorded before fingerprints existed is never refused or reported."""
    rt, h, req = await _suspended(bench)
    handle = rt.snapshot(h)
    assert handle.cp is not None
    handle.cp.fingerprint = None
    await rt.commit(Change().checkpoint(handle, handle.cp))
    assert "fingerprint" not in (bench.store.get_checkpoint(rt.id, h) or {})
    await _reattach(bench, rt, cashier(V2))
    assert rt.definition_changed(rt.snapshot(h)) == []
    out = await rt.resume(Answer(req, ok=True))
    assert out.result is not None and out.result.status is Status.DONE


async def test_a_parent_suspended_on_task_records_no_tool_but_its_soul(bench: Bench) -> None:
    bench.model.script = two_level_model
    bench.tools.functions["secret_action"] = secret_action
    rt = await new_runtime(bench, "n1", COORD, cashier())
    top = (await rt.spawn("root", "coordinator")).id
    await rt.wake(top, "start")
    req = (await rt.wait(top, 5000)).pending
    assert req is not None
    parent_cp = rt.snapshot(top).cp
    assert parent_cp is not None and parent_cp.fingerprint is not None
    assert (parent_cp.fingerprint.tool, parent_cp.fingerprint.schema) == ("", None)
    await _reattach(bench, rt, replace(COORD, soul="a new coordinator"), cashier(V2))
    assert [c.part for c in rt.definition_changed(rt.snapshot(top))] == ["soul"]
    with pytest.raises(FailedPrecondition, match='tool "secret_action" changed since request'):
        await rt.resume(Answer(req.id, ok=True), upgrade=True)  # the leaf's tool refuses the whole cascade
    out = await rt.resume(Answer(req.id, ok=True), accept_changed_definition=True)
    assert out.handle == top and out.result is not None and out.result.status is Status.DONE


class UnreadableHandles(MemoryStore):
    """A store whose scan of handle records fails as a damaged record makes it fail."""

    def handles(self, runtime_id: str) -> list[dict]:  # type: ignore[type-arg]
        raise DataLoss(f"handles/{runtime_id}: record unreadable")


async def test_an_unreadable_handle_scan_costs_the_events_not_the_reattach() -> None:
    store = UnreadableHandles()
    bench_model = ScriptedModel(script=mock_model)
    tools = FunctionTools({"secret_action": secret_action})
    engine = Engine(store, clock=ManualClock(), model_for=lambda llm: bench_model,
                    executors={ToolSource.NATIVE: tools})
    await engine.start()
    try:
        out = await engine.new("u1", [cashier()], LLM, RuntimeOptions())
        rt = engine.runtime(out.runtime_id)
        h = (await rt.spawn("root", "asker")).id
        await rt.wake(h, "go")
        pending = (await rt.wait(h, 5000)).pending
        assert pending is not None
        engine_out = await engine.new("u1", [cashier(V2)], LLM, RuntimeOptions())
        assert engine_out.reattached
        await engine.settle_background()
        # the handle is in memory: its event is still written, and Resume still refuses
        assert [e.type for e in store.events("u1", 0, 1000)].count(EventType.REATTACH) == 1
        with pytest.raises(FailedPrecondition):
            await rt.resume(Answer(pending.id, ok=True), upgrade=True)
    finally:
        await engine.stop()


async def test_mcp_servers_without_the_sdk_are_refused(bench: Bench) -> None:
    """A daemon without an MCP lister (the mcp SDK not installed) refuses mcp_servers, never ignores them."""
    painter = AgentDef(name="painter", mcp_servers=(McpServer("paint", "http://127.0.0.1:1/mcp"),))
    with pytest.raises(FailedPrecondition, match="mcp SDK is not installed"):
        await bench.engine.new("m1", [painter], LLM, RuntimeOptions())
