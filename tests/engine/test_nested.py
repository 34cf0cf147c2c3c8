"""Sub-agents through the task tool: nested durable suspension, cascade resume, reattachment."""

from __future__ import annotations

from toolnexus_daemon.engine.verbs.runtime import Runtime
from toolnexus_daemon.model import (
    JSON,
    AgentDef,
    Answer,
    EventType,
    HandleState,
    Request,
    Status,
    ToolDef,
    ToolResult,
)
from toolnexus_daemon.tools.base import ToolInvocation
from toolnexus_devtools import chat_response, mock_model, tool_call

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
    assert result.pending.data == {"path": leaf.split("/")}
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


def check_secret(args: JSON, inv: ToolInvocation) -> ToolResult:
    if inv.answer is None:
        return ToolResult(output="", pending=Request(id="", kind="approval", prompt="approve secret access?"))
    return ToolResult(output="secret-token")


def escalation_model(body: JSON) -> JSON:
    messages = body["messages"]
    tools = [m for m in messages if m["role"] == "tool"]
    if messages[0]["content"] == "asker":
        if tools:
            return chat_response(content="asker-done: " + tools[0]["content"], usage=(1, 1, 2))
        return chat_response(tool_calls=[tool_call("check_secret", {})], usage=(1, 1, 2))
    if tools:
        return chat_response(content="parent-final: " + tools[0]["content"], usage=(1, 1, 2))
    delegate = tool_call("task", {"agent": "asker", "prompt": "get it"})
    return chat_response(tool_calls=[delegate], usage=(1, 1, 2))


PARENT_WF = AgentDef(name="parent", soul="parent", team=("asker",), wait_for=True)
ASKER2 = AgentDef(name="asker", soul="asker", tools=(ToolDef(name="check_secret"),))


async def test_the_nearest_interpreter_answers_inline(bench: Bench) -> None:
    bench.model.script = escalation_model
    bench.tools.functions["check_secret"] = check_secret
    rt = await new_runtime(bench, "e1", PARENT_WF, ASKER2)
    top = await rt.spawn("root", "parent")
    await rt.wake(top.id, "go")
    result = await rt.wait(top.id, 5000)
    assert (result.status, result.text) == (Status.DONE, "parent-final: asker-done: secret-token")
    leaf = f"{top.id}/asker.1"
    moves = [(e.from_state, e.to_state) for e in bench.store.events("e1", 0, 1000)
             if e.type is EventType.TRANSITION and e.handle == leaf]
    assert moves == [("idle", "running"), ("running", "suspended"), ("suspended", "running"),
                     ("running", "idle"), ("idle", "closed")]
    notes = [e.note for e in bench.store.events("e1", 0, 1000)]
    assert f'{leaf}: escalate → {top.id} answers ("nearest interpreter")' in notes
    assert [r.prompt for r in bench.resolver.asked] == ["approve secret access?"]
    call_ids = [inv.call_id for inv in bench.tools.ledger]
    assert len(call_ids) == 2 and len(set(call_ids)) == 2, "a re-invocation is a new call_id"


async def test_without_a_resolver_the_suspension_is_durable(bench: Bench) -> None:
    bench.resolver.connected = False
    bench.model.script = escalation_model
    bench.tools.functions["check_secret"] = check_secret
    rt = await new_runtime(bench, "e2", PARENT_WF, ASKER2)
    top = await rt.spawn("root", "parent")
    await rt.wake(top.id, "go")
    result = await rt.wait(top.id, 5000)
    assert result.status is Status.PENDING and result.pending is not None
    assert result.pending.kind == "approval" and bench.resolver.asked == []


async def test_a_declining_interpreter_feeds_back_the_decline(bench: Bench) -> None:
    bench.resolver.answer_for = lambda req: Answer(req.id, ok=False, reason="declined")
    bench.model.script = escalation_model
    bench.tools.functions["check_secret"] = check_secret
    rt = await new_runtime(bench, "e3", PARENT_WF, ASKER2)
    top = await rt.spawn("root", "parent")
    await rt.wake(top.id, "go")
    result = await rt.wait(top.id, 5000)
    assert result.text == "parent-final: asker-done: declined/expired: approve secret access?"


async def test_two_suspensions_in_one_message_surface_one_after_the_other(bench: Bench) -> None:
    def first_then_answer(body: JSON) -> JSON:
        tools = [m["content"] for m in body["messages"] if m["role"] == "tool"]
        if tools:
            return chat_response(content=" & ".join(tools))
        return chat_response(tool_calls=[tool_call("ask", {"n": 1}, "c1"), tool_call("ask", {"n": 2}, "c2"),
                                         tool_call("plain", {}, "c3")])

    def ask(args: JSON, inv: ToolInvocation) -> ToolResult:
        if inv.answer is None:
            n = args["n"]
            return ToolResult(output="", pending=Request(id=f"q{n}", kind="input", prompt=f"n{n}?"))
        return ToolResult(output=f"got {args['n']}")

    bench.model.script = first_then_answer
    bench.tools.functions.update(ask=ask, plain=lambda a, i: ToolResult(output="plain"))
    two = AgentDef(name="two", tools=(ToolDef(name="ask"), ToolDef(name="plain")))
    rt = await new_runtime(bench, "t2", two)
    h = await rt.spawn("root", "two")
    await rt.wake(h.id, "go")
    first = await rt.wait(h.id, 5000)
    assert first.pending is not None and first.pending.id == "q1"
    second = await rt.resume(Answer("q1", ok=True))
    assert second.result is not None and second.result.pending is not None
    assert second.result.pending.id == "q2"
    final = await rt.resume(Answer("q2", ok=True))
    assert final.result is not None and final.result.text == "got 1 & got 2 & plain"
    plain_runs = [inv for inv in bench.tools.ledger if inv.tool.name == "plain"]
    assert len(plain_runs) == 1, "a completed call is never run again"
