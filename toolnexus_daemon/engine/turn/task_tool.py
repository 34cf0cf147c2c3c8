"""The built-in ``task`` tool: spawn, wake, wait and close a team member, fused (docs/protocol.md §2, §4).

Reattachment is what makes nested resume safe: a parent re-running its
``task`` call (after a resume cascade or a crash) finds the child it already
started by task key ``<agent>:<prompt>`` and takes its recorded result, its
pending, or waits for it — it never spawns a second child.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from ...errors import DaemonError, StoreUnavailable
from ...model import JSON, AgentDef, EventType, HandleState, Status, TaskResult, ToolResult
from ..state import notes
from ..state.change import Change
from ..state.checkpoint import Call
from ..state.handle import Handle
from . import ending

if TYPE_CHECKING:
    from .context import Delegating

DESCRIPTION_HEAD = "Delegate a subtask to an isolated subagent. Available agents — "
SCHEMA: JSON = {"type": "object", "properties": {"agent": {"type": "string"}, "prompt": {"type": "string"}},
                "required": ["agent", "prompt"]}


def tool_payload(agent: AgentDef, agents: Mapping[str, AgentDef]) -> JSON:
    """The ``task`` function the model sees: the team sorted by name, each with what it does (as
    ``agents``, the registry version of the handle, defines them)."""
    team = sorted(agent.team)
    listing = "; ".join(f"{name}: {agents[name].does if name in agents else ''}" for name in team)
    return {"type": "function", "function": {"name": "task", "description": DESCRIPTION_HEAD + listing,
                                             "parameters": SCHEMA}}


def _bad_arguments(args: JSON) -> str | None:
    for name in ("agent", "prompt"):
        if not isinstance(args.get(name), str) or not args.get(name):
            return f'task needs the string arguments "agent" and "prompt" (missing or not a string: {name})'
    return None


async def run_task(rt: Delegating, parent: Handle, call: Call) -> ToolResult:
    """Delegate to a team member, or reattach to the child already running this task."""
    args = call.arguments
    problem = _bad_arguments(args)
    if problem:
        return ToolResult(output=problem, is_error=True)
    agent, prompt = str(args["agent"]), str(args["prompt"])
    team = rt.agent_of(parent).team
    if agent not in team:
        return ToolResult(output=f'agent "{agent}" not in this agent\'s team ({", ".join(sorted(team))})',
                          is_error=True)
    key = f"{agent}:{prompt}"
    child = _child_by_key(rt, parent, key)
    if child is not None:
        await rt.commit(Change().event(parent, EventType.REATTACH, notes.reattach(parent.id, child.id,
                                                                                   str(child.state)),
                                       data={"child": child.id, "task_key": key}))
        result = await _outcome(rt, parent, child, prompt)
    else:
        try:
            child = await rt.spawn(parent.id, agent, task_key=key)
            await rt.wake(child.id, prompt)
        except StoreUnavailable:
            raise  # not the task's refusal: the turn is continued once the store is back
        except DaemonError as exc:
            return ToolResult(output=f"task refused: {exc}", is_error=True)
        result = await rt.wait(child.id)
    return await _deliver(rt, child, result)


def _child_by_key(rt: Delegating, parent: Handle, key: str) -> Handle | None:
    for cid in parent.children:
        child = rt.table.get(cid)
        if child is not None and child.task_key == key:
            return child
    return None


async def _outcome(rt: Delegating, parent: Handle, child: Handle, prompt: str) -> TaskResult:
    """A reattached child's result: recorded if settled, its pending if suspended, else wait."""
    queued = any(q[0] == child.id for q in parent.wake_queue)
    if child.state is HandleState.IDLE and child.last_result is None and not queued:
        await rt.wake(child.id, prompt)  # spawned just before a crash, never woken: wake it now
    elif child.state in (HandleState.IDLE, HandleState.CLOSED) and child.last_result is not None:
        return child.last_result
    if child.state is HandleState.SUSPENDED and child.last_result is not None:
        return child.last_result
    return await rt.wait(child.id)


async def _deliver(rt: Delegating, child: Handle, result: TaskResult) -> ToolResult:
    """The child's result as the parent's tool result; a settled child is closed, keeping its result."""
    if result.status is Status.PENDING and result.pending is not None:
        return ToolResult(output="", pending=result.pending)
    if child.state is HandleState.IDLE:
        await ending.close(rt, child, "task settled", keep_result=True)
    text = result.text if result.status is Status.DONE else f"[{result.status}] {result.text}"
    return ToolResult(output=text, is_error=result.is_error,
                      metadata={"agent": child.id, "turns": result.turns, "totalTokens": result.total_tokens})
