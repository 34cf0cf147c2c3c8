"""Sub-agents through the task tool: nested durable suspension, cascade resume, reattachment."""

from __future__ import annotations

from toolnexus_daemon.devtools import chat_response, mock_model, tool_call
from toolnexus_daemon.engine.runtime import Runtime
from toolnexus_daemon.model import (
    JSON,
    AgentDef,
    Answer,
    EventType,
    HandleState,
    Status,
    ToolDef,
)

from .conftest import Bench, new_runtime
from .test_single_level import secret_action

COORD = AgentDef(name="coordinator", does="plans", soul="coord", team=("asker",))
ASKER = AgentDef(name="asker", does="asks for approval", soul="asker", tools=(ToolDef(name="secret_action"),))


def two_level_model(body: JSON) -> JSON:
    """The coordinator delegates once then echoes the task result; the asker is the reference mock."""
    messages = body["messages"]
    if messages[0]["content"] == "asker":
        return mock_model(body)
    tools = [m for m in messages if m["role"] == "tool"]
    if tools:
        return chat_response(content="coordinator saw: " + tools[0]["content"], usage=(1, 1, 2))
    return chat_response(tool_calls=[tool_call("task", {"agent": "asker", "prompt": "get approval"})],
                         usage=(4, 1, 5))


async def _nested(bench: Bench) -> tuple[Runtime, str]:
    bench.model.script = two_level_model
    bench.tools.functions["secret_action"] = secret_action
    rt = await new_runtime(bench, "n1", COORD, ASKER)
    top = await rt.spawn("root", "coordinator")
    await rt.wake(top.id, "start")
    return rt, top.id


async def test_a_suspending_child_suspends_its_parent_with_the_same_request(bench: Bench) -> None:
    rt, top = await _nested(bench)
    result = await rt.wait(top, 5000)
    assert result.status is Status.PENDING and result.pending is not None
    leaf = f"{top}/asker.1"
    assert result.pending.data == {"path": ["root", top, leaf]}
    assert rt.snapshot(leaf).state is HandleState.SUSPENDED
    assert rt.snapshot(top).pending.id == result.pending.id
    task_tool = bench.model.bodies[0]["tools"][0]["function"]
    assert task_tool["name"] == "task"
    assert task_tool["description"] == ("Delegate a subtask to an isolated subagent. Available agents — "
                                        "asker: asks for approval")


async def test_resume_cascades_up_and_reattaches_without_a_second_child(bench: Bench) -> None:
    rt, top = await _nested(bench)
    pending = (await rt.wait(top, 5000)).pending
    out = await rt.resume(Answer(id=pending.id, ok=True))
    assert out.handle == top, "the response names the top-most handle the cascade reached"
    assert out.result.status is Status.DONE and out.result.text == "coordinator saw: action performed"
    snap = rt.snapshot(top)
    assert snap.children == [f"{top}/asker.1"], "reattached, never spawned twice"
    assert rt.snapshot(f"{top}/asker.1").state is HandleState.CLOSED
    assert snap.usage.total_tokens == 5 + 5 + 3 + 2, "child usage rolls up into the parent"
    events = bench.store.events("n1", 0, 1000)
    reattach = [e.note for e in events if e.type is EventType.REATTACH]
    assert f"{top}: task replay → REATTACH to {top}/asker.1 (state running)" in reattach or \
        f"{top}: task replay → REATTACH to {top}/asker.1 (state idle)" in reattach


async def test_out_of_team_task_is_an_error_result(bench: Bench) -> None:
    calls = iter([
        chat_response(tool_calls=[tool_call("task", {"agent": "ghost", "prompt": "x"})]),
        chat_response(content="done"),
    ])
    bench.model.script = lambda body: next(calls)
    rt = await new_runtime(bench, "n2", COORD, ASKER)
    h = await rt.spawn("root", "coordinator")
    await rt.wake(h.id, "go")
    assert (await rt.wait(h.id, 5000)).status is Status.DONE
    tool_msg = bench.model.bodies[1]["messages"][-1]
    assert tool_msg["content"] == 'agent "ghost" not in this agent\'s team (asker)'
