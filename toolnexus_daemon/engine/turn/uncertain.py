"""Calls whose outcome is unknown: tools with ``on_crash: "ask"`` (docs/protocol.md §11).

A call of an ``ask`` tool is recorded as in flight in the step checkpoint — durably, before it is
handed to a worker or a web service — and stays so until its result is recorded. A call found in
flight when the turn runs again (the daemon restarted or took the runtime over), or whose worker
vanished or whose service never answered, is not sent again: it gets a ``reconcile`` request
instead, which suspends the handle like any other. Its answer decides what the call returned:
``ok`` with ``data.output`` is that output, ``ok`` without it runs the call again with the same
``call_id`` (the tool's idempotency key), a decline is the error ``not completed: <tool>``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from ...bounds import check_tool_result
from ...model import JSON, Answer, OnCrash, Request, ToolResult
from ..state.checkpoint import RECONCILE, Call, Checkpoint, Step, reconcile_id
from ..state.handle import Handle

if TYPE_CHECKING:
    from .context import Checked


def asks(rt: Checked, h: Handle, call: Call) -> bool:
    """Whether ``call`` is of a tool that declared ``on_crash: "ask"``."""
    tool = next((t for t in rt.agent_of(h).tools if t.name == call.name), None)
    return tool is not None and tool.on_crash is OnCrash.ASK and not call.invalid


def reconcile_request(step: Step, i: int) -> ToolResult:
    """A new ``reconcile`` question about call ``i`` (a fresh id each round: an earlier one may be
    answered already, and a request id is single-use)."""
    step.reconciles[i] = step.reconciles.get(i, 0) + 1
    call = step.calls[i]
    data: JSON = {"call_id": call.call_id, "tool": call.name, "arguments": call.arguments}
    request = Request(reconcile_id(call.call_id, step.reconciles[i]), RECONCILE,
                      f"did {call.name} complete?", data=data)
    return ToolResult(output="", pending=request)


def asks_about(step: Step, i: int, request: Request) -> bool:
    """Whether ``request`` is the current ``reconcile`` question about call ``i``."""
    return i in step.reconciles and request.id == reconcile_id(step.calls[i].call_id, step.reconciles[i])


def settled_by_answer(rt: Checked, call: Call, answer: Answer) -> ToolResult | None:
    """What an answer to a ``reconcile`` request makes of the call; None = run it again."""
    if not answer.ok:
        return ToolResult(output=f"not completed: {call.name}", is_error=True)
    data = answer.data or {}
    if "output" not in data:
        return None
    output = data["output"]
    text = output if isinstance(output, str) else json.dumps(output, default=str)
    result = ToolResult(output=text, is_error=bool(data.get("is_error")))
    return check_tool_result(result, call.name, rt.deps.limits)


def plan(rt: Checked, h: Handle, cp: Checkpoint, step: Step, todo: list[int],
         answered: set[int]) -> dict[int, ToolResult]:
    """The results of ``todo`` decided without dispatching anything: a ``reconcile`` question for
    each call still recorded in flight, and the answer's verdict for each answered ``reconcile``."""
    decided: dict[int, ToolResult] = {}
    for i in todo:
        if i in step.inflight:
            decided[i] = reconcile_request(step, i)
        elif i in answered and step.reconciling(i) and cp.answer is not None:
            verdict = settled_by_answer(rt, step.calls[i], cp.answer)
            if verdict is not None:
                decided[i] = verdict
    return decided


def record_dispatch(rt: Checked, h: Handle, step: Step, dispatch: list[int]) -> bool:
    """Mark the ``ask`` calls about to be dispatched as in flight; True if any was (then the
    checkpoint must be committed before they are sent)."""
    marked = [i for i in dispatch if asks(rt, h, step.calls[i])]
    step.inflight.update(marked)
    return bool(marked)
