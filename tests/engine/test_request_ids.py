"""Request ids are single-use, chained approvals, one answer per question (docs/protocol.md §4)."""

from __future__ import annotations

from collections.abc import Callable

from toolnexus_daemon.engine.turn.step import MAX_CHAINED
from toolnexus_daemon.errors import FailedPrecondition
from toolnexus_daemon.model import JSON, AgentDef, Answer, HandleState, Request, Status, ToolDef, ToolResult
from toolnexus_daemon.tools.base import ToolInvocation
from toolnexus_devtools.model_server import chat_response, tool_call

from .conftest import Bench, new_runtime

OPERATOR = AgentDef(name="operator", does="acts", tools=(ToolDef(name="act"),))


def tool_messages(body: JSON) -> list[JSON]:
    return [m for m in body.get("messages") or [] if m.get("role") == "tool"]


def model_calling_act(times: int, parallel: int = 1) -> Callable[[JSON], JSON]:
    """Asks for ``act`` (``parallel`` calls in one step) until ``times`` steps had results."""
    def script(body: JSON) -> JSON:
        done = tool_messages(body)
        if len(done) >= times * parallel:
            return chat_response(content=" | ".join(str(m["content"]) for m in done))
        calls = [tool_call("act", {}, id=f"c{len(done)}_{i}") for i in range(parallel)]
        return chat_response(tool_calls=calls)
    return script


def fixed_id_tool(request_id: str) -> Callable[[JSON, ToolInvocation], ToolResult]:
    """Asks for approval under one fixed id each time it runs without an answer (what the README's
    ``secret:{handle}`` pattern does for every action of a handle)."""
    def act(args: JSON, inv: ToolInvocation) -> ToolResult:
        if inv.answer is None:
            return ToolResult(output="", pending=Request(id=request_id, kind="approval", prompt="approve?"))
        return ToolResult(output=f"performed after {inv.answer.id}")
    return act


async def test_a_replayed_answer_cannot_approve_a_later_action(bench: Bench) -> None:
    bench.model.script = model_calling_act(times=2)
    bench.tools.functions["act"] = fixed_id_tool("secret")
    rt = await new_runtime(bench, "r1", OPERATOR)
    h = (await rt.spawn("root", "operator")).id
    await rt.wake(h, "go")
    first = await rt.wait(h, 5000)
    assert first.pending is not None and first.pending.id == "secret"
    await rt.resume(Answer(id="secret", ok=True), no_wait=True)
    second = await rt.wait(h, 5000)
    assert second.status is Status.PENDING and second.pending is not None
    assert second.pending.id.startswith("secret~") and len(second.pending.id) == len("secret~") + 12

    replay = await rt.resume(Answer(id="secret", ok=True), no_wait=True)
    assert replay.duplicate
    assert rt.snapshot(h).state is HandleState.SUSPENDED and rt.snapshot(h).pending.id == second.pending.id
    assert [inv.answer.id for inv in bench.tools.ledger if inv.answer] == ["secret"]

    done = await rt.resume(Answer(id=second.pending.id, ok=True))
    assert done.result is not None and done.result.status is Status.DONE
    assert done.result.text == f"performed after secret | performed after {second.pending.id}"


async def test_calls_of_one_step_suspended_on_one_id_are_resolved_by_one_answer(bench: Bench) -> None:
    bench.model.script = model_calling_act(times=1, parallel=3)
    bench.tools.functions["act"] = fixed_id_tool("same")
    rt = await new_runtime(bench, "r2", OPERATOR)
    h = (await rt.spawn("root", "operator")).id
    await rt.wake(h, "go")
    assert (await rt.wait(h, 5000)).status is Status.PENDING
    out = await rt.resume(Answer(id="same", ok=True))
    assert out.result is not None and out.result.status is Status.DONE, out.result
    assert out.result.text == " | ".join(["performed after same"] * 3)
    answered = [inv for inv in bench.tools.ledger if inv.answer is not None]
    assert len(answered) == 3 and len(bench.tools.ledger) == 6  # each call once asked, once answered


def chain_tool(ids: list[str]) -> Callable[[JSON, ToolInvocation], ToolResult]:
    """Asks under ``ids[0]``; each ok answer to ``ids[n]`` asks again under ``ids[n+1]``."""
    def act(args: JSON, inv: ToolInvocation) -> ToolResult:
        nxt = 0 if inv.answer is None else ids.index(inv.answer.id.split("~")[0]) + 1
        if nxt < len(ids):
            ask = Request(id=ids[nxt], kind="approval", prompt=f"ask {ids[nxt]}")
            return ToolResult(output="", pending=ask)
        return ToolResult(output="approved by all")
    return act


async def test_a_chained_approval_is_a_new_durable_suspension_of_the_same_call(bench: Bench) -> None:
    bench.model.script = model_calling_act(times=1)
    bench.tools.functions["act"] = chain_tool(["manager", "director"])
    rt = await new_runtime(bench, "r3", OPERATOR)
    h = (await rt.spawn("root", "operator")).id
    await rt.wake(h, "go")
    assert (await rt.wait(h, 5000)).pending.id == "manager"  # type: ignore[union-attr]
    await rt.resume(Answer(id="manager", ok=True), no_wait=True)
    second = await rt.wait(h, 5000)
    assert second.status is Status.PENDING and second.pending is not None
    assert (second.pending.id, second.pending.prompt) == ("director", "ask director")
    assert rt.snapshot(h).state is HandleState.SUSPENDED
    out = await rt.resume(Answer(id="director", ok=True))
    assert out.result is not None and (out.result.status, out.result.text) == (Status.DONE, "approved by all")
    assert len(bench.model.bodies) == 2  # the chain never went back to the model


async def test_a_chain_longer_than_the_limit_ends_unresolved(bench: Bench) -> None:
    ids = [f"level{n}" for n in range(MAX_CHAINED + 3)]
    bench.model.script = model_calling_act(times=1)
    bench.tools.functions["act"] = chain_tool(ids)
    rt = await new_runtime(bench, "r4", OPERATOR)
    h = (await rt.spawn("root", "operator")).id
    await rt.wake(h, "go")
    asked = []
    result = await rt.wait(h, 5000)
    while result.status is Status.PENDING and result.pending is not None:
        asked.append(result.pending.id)
        await rt.resume(Answer(id=result.pending.id, ok=True), no_wait=True)
        result = await rt.wait(h, 5000)
    assert asked == ids[:MAX_CHAINED]
    assert (result.status, result.text) == (Status.DONE, f"unresolved: ask {ids[MAX_CHAINED]}")


async def test_the_same_id_again_after_an_ok_is_unresolved(bench: Bench) -> None:
    bench.model.script = model_calling_act(times=1)
    bench.tools.functions["act"] = lambda args, inv: ToolResult(
        output="", pending=Request(id="again", kind="approval", prompt="still?"))
    rt = await new_runtime(bench, "r5", OPERATOR)
    h = (await rt.spawn("root", "operator")).id
    await rt.wake(h, "go")
    await rt.wait(h, 5000)
    out = await rt.resume(Answer(id="again", ok=True))
    assert out.result is not None
    assert (out.result.status, out.result.text) == (Status.DONE, "unresolved: still?")


async def test_a_request_id_the_index_cannot_hold_is_that_calls_error(bench: Bench) -> None:
    bench.model.script = model_calling_act(times=1)
    bench.tools.functions["act"] = fixed_id_tool("x" * 251)
    rt = await new_runtime(bench, "r6", OPERATOR)
    h = (await rt.spawn("root", "operator")).id
    await rt.wake(h, "go")
    result = await rt.wait(h, 5000)
    assert result.status is Status.DONE and "pending.id is over 250 bytes" in result.text
    assert rt.snapshot(h).state is HandleState.IDLE


async def test_an_upgrading_resume_for_an_agent_missing_from_the_registry_keeps_the_answer_pending(
        bench: Bench) -> None:
    bench.model.script = model_calling_act(times=1)
    bench.tools.functions["act"] = fixed_id_tool("keep")
    rt = await new_runtime(bench, "r7", OPERATOR)
    h = (await rt.spawn("root", "operator")).id
    await rt.wake(h, "go")
    await rt.wait(h, 5000)
    other = AgentDef(name="other", does="other things")
    await bench.engine.new("r7", [other], rt.llm, rt.options)
    try:
        await rt.resume(Answer(id="keep", ok=True), upgrade=True)
    except Exception as exc:  # noqa: BLE001 - the exact error is asserted below
        refused = exc
    assert isinstance(refused, FailedPrecondition) and "operator" in str(refused)
    assert rt.snapshot(h).state is HandleState.SUSPENDED
    await bench.engine.new("r7", [OPERATOR], rt.llm, rt.options)
    out = await rt.resume(Answer(id="keep", ok=True), upgrade=True)
    assert out.result is not None and out.result.text == "performed after keep"
