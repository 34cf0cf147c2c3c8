"""Durable MCP tasks: the id is the run's runtime and handle, the status is the handle's.

Nothing is stored for a task beyond the handle itself, so a task outlives the daemon process that
created it: after a restart (or on another daemon sharing the store) ``tasks/get`` reads the
handle, ``tasks/result`` waits on it, ``tasks/cancel`` interrupts and closes it. ``tasks/list``
lists the exposed runtimes' top-level handles — every agent run under ``root``, however started.

Status: ``working`` while the handle runs (or waits its turn), ``input_required`` while it is
suspended, then ``completed`` (result ``done``), ``cancelled`` (interrupted or closed) or
``failed`` (any other status: error, incomplete, timeout).
"""

from __future__ import annotations

from datetime import UTC, datetime

import mcp_types as types

from ..errors import InvalidArgument
from ..model import ROOT_ID, HandleState, Status, TaskResult
from .runs import Run
from .verbs import View

# ":" never occurs in a runtime id ([A-Za-z0-9_.-]), so the first one splits the task id
SEP = ":"
POLL_INTERVAL_MS = 1000
CANCELLED = frozenset({Status.INTERRUPTED, Status.CLOSED})


def task_id(run: Run) -> str:
    return f"{run.runtime_id}{SEP}{run.handle}"


def run_of(task: str, exposed: tuple[str, ...]) -> Run:
    """The run a task id names; INVALID_ARGUMENT for one this server did not hand out."""
    runtime_id, sep, handle = task.partition(SEP)
    if not sep or runtime_id not in exposed or not handle.startswith(ROOT_ID + "/"):
        raise InvalidArgument(f"unknown task id {task[:200]!r}: task ids look like RUNTIME:root/AGENT.N "
                              "and name a runtime this server exposes")
    return Run(runtime_id, handle)


def status_of(h: View) -> tuple[types.TaskStatus, str | None]:
    """The task status of handle ``h`` and a line saying why."""
    result = h.last_result
    if h.state is HandleState.SUSPENDED:
        prompt = h.pending.prompt if h.pending is not None else ""
        request = h.pending.id if h.pending is not None else ""
        return "input_required", f"waiting for an answer to {request}: {prompt}"
    if h.state is HandleState.RUNNING or result is None:
        return ("cancelled", "closed") if h.state is HandleState.CLOSED else ("working", None)
    return terminal(result)


def terminal(result: TaskResult) -> tuple[types.TaskStatus, str | None]:
    if result.status is Status.DONE:
        return "completed", None
    if result.status in CANCELLED:
        return "cancelled", f"[{result.status}] {result.text}"
    if result.status is Status.PENDING:
        return "input_required", result.pending.prompt if result.pending else None
    return "failed", f"[{result.status}] {result.text}"


def task_of(run: Run, h: View, now: datetime | None = None) -> types.Task:
    status, message = status_of(h)
    created = _iso(datetime.fromtimestamp(h.spawned_at, UTC)) if h.spawned_at else _iso(now)
    return types.Task(task_id=task_id(run), status=status, status_message=message, created_at=created,
                      last_updated_at=_iso(now), ttl=None, poll_interval=POLL_INTERVAL_MS)


def _iso(at: datetime | None) -> str:
    return (at or datetime.now(UTC)).isoformat().replace("+00:00", "Z")
