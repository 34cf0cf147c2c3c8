"""One rule decides whether a request has expired: ``now >= expires_at`` (``engine/expiry/rule.py``).

Resume, an escalation's inline answer and an answer link each asked their own question before, and
at the instant ``expires_at`` itself they disagreed: Resume declined an answer (``>=``) that the
link still offered as pending and the escalation accepted (``>``). On the virtual clock, each is
asked exactly at the boundary, and one microsecond before it."""

from __future__ import annotations

import pytest

from toolnexus_daemon.answers.links import Links, LinkState
from toolnexus_daemon.clock import rfc3339
from toolnexus_daemon.engine.expiry.rule import expired
from toolnexus_daemon.model import JSON, AgentDef, Answer, Request, Status, TaskResult, ToolDef, ToolResult
from toolnexus_daemon.tools.base import ToolInvocation
from toolnexus_devtools.model_server import chat_response, tool_call

from .conftest import Bench, new_runtime

START = 1_800_000_000.0  # the bench's ManualClock starts here: whole seconds, exact in a float
TTL_S = 60
AT = rfc3339(START + TTL_S)


def _asks(args: JSON, inv: ToolInvocation) -> ToolResult:
    if inv.answer is None:
        return ToolResult(output="", pending=Request(id="ok", kind="approval", prompt="ship?", expires_at=AT))
    return ToolResult(output="shipped")


def _calls_once(body: JSON) -> JSON:
    if any(m.get("role") == "tool" for m in body.get("messages") or []):
        return chat_response(content="finished")
    return chat_response(tool_calls=[tool_call("act", {})])


async def _run(bench: Bench, tool: ToolDef, **options: bool) -> tuple[str, TaskResult]:
    bench.model.script = _calls_once
    bench.tools.functions["act"] = _asks
    rt = await new_runtime(bench, "r", AgentDef(name="shipper", tools=(tool,)), **options)
    h = (await rt.spawn("root", "shipper")).id
    await rt.wake(h, "go")
    # longer than the virtual time a test advances while it waits
    result = await rt.wait(h, 10 * TTL_S * 1000)
    return h, result


def test_the_rule_at_its_boundary() -> None:
    request = Request(id="r", kind="approval", prompt="p", expires_at=AT)
    assert not expired(request, START + TTL_S - 0.000_001)
    assert expired(request, START + TTL_S)
    assert expired(request, START + TTL_S + 0.000_001)
    assert not expired(Request(id="r", kind="approval", prompt="p"), START + 10 ** 9)
    assert not expired(Request(id="r", kind="approval", prompt="p", expires_at="soon"), START + 10 ** 9)


@pytest.mark.parametrize(("early_s", "read"), [(0.0, "declined/expired: ship?"), (0.000_001, "shipped")])
async def test_an_answer_at_expires_at_is_a_decline(bench: Bench, early_s: float, read: str) -> None:
    h, result = await _run(bench, ToolDef(name="act"))
    assert result.status is Status.PENDING
    bench.clock.advance(TTL_S - early_s)
    await bench.engine.runtime("r").resume(Answer(id="ok", ok=True))
    assert _tool_output(bench, h) == read


def _tool_output(bench: Bench, h: str) -> str:
    """What the tool call of ``h`` answered, as the model read it (its last tool message)."""
    messages = bench.store.messages("r", h)
    return next(str(m.get("content")) for m in reversed(messages) if m.get("role") == "tool")


async def test_an_answer_link_opened_at_expires_at_reads_expired(bench: Bench) -> None:
    bench.engine.answer_base = "https://approve.example"
    _, result = await _run(bench, ToolDef(name="act", answer_link=True))
    assert result.pending is not None and result.pending.answer_url
    token = result.pending.answer_url.rsplit("/", 1)[1]
    links = Links(bench.engine, bench.clock)
    bench.clock.advance(TTL_S - 0.000_001)
    before = links.find(token)
    assert before is not None and before.state is LinkState.PENDING
    bench.clock.advance(0.000_001)  # exactly expires_at; the scheduler has not run yet (no await)
    at = links.find(token)
    assert at is not None and at.state is LinkState.EXPIRED, "the link must agree with Resume"


async def test_an_inline_answer_at_expires_at_is_a_decline(bench: Bench) -> None:
    """The interpreter answers ok exactly at ``expires_at``: the step reads a decline, as Resume would."""
    def at_the_deadline(request: Request) -> Answer:
        bench.clock.advance(TTL_S)
        return Answer(request.id, ok=True)

    bench.resolver.answer_for = at_the_deadline
    h, result = await _run(bench, ToolDef(name="act"), wait_for=True)
    assert result.status is Status.DONE
    assert [inv.answer for inv in bench.tools.ledger] == [None], "an expired answer must not reach the tool"
    assert _tool_output(bench, h) == "declined/expired: ship?"
