"""``notifications/tasks/status``: a task's status, sent to the session that created it as it changes.

A task-augmented ``tools/call`` is answered at once, so the request stream it came on is gone by
the time the run suspends or ends; the notification rides the session's standalone stream (the
GET stream of streamable HTTP), as the specification lets task messages do. Each one carries the
full task, what ``tasks/get`` answers, and no related-task ``_meta`` (the task id is in it).

One follower per task, started for the session that created it while the runtime is held here:
it reads the handle's events in process, from just before the spawn (so nothing between the
``CreateTaskResult`` and the follower's start is missed), and sends a notification on each change
of status — ``working`` → ``input_required`` → ``working`` → ``completed``, ``failed`` or
``cancelled``. It ends at a terminal status, when the session ends (the connection's teardown
cancels it: a client that leaves leaves nothing running), when the runtime stops being held here,
or when the listener closes; each end is logged (``mcp task status follower ended``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from contextlib import AsyncExitStack
from datetime import datetime
from typing import Any

import mcp_types as types
from mcp.server.session import ServerSession
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import SerializerFunctionWrapHandler, model_serializer

from ..engine.verbs.engine import Engine
from ..errors import DaemonError
from ..model import Event, EventType, HandleState
from . import tasks
from .runs import Run, closing
from .verbs import View, view_of

log = logging.getLogger("toolnexus_daemon.mcp")

STATUS_EVENTS = frozenset({EventType.TRANSITION, EventType.PENDING, EventType.ESCALATE, EventType.RESULT,
                           EventType.CLOSED})
TERMINAL = frozenset({"completed", "failed", "cancelled"})
# a transition into one of these states is followed, in the same commit, by the event that says
# what it means: the PENDING or ESCALATE naming the question, the RESULT, the CLOSED, or the
# transition on to running (an answer); the status is read after that one
UNDECIDED = frozenset({HandleState.IDLE, HandleState.SUSPENDED, HandleState.CLOSED})
# the connection's scratch-state key for the followers its session started
SESSION_KEY = "toolnexus.task_status_followers"
SESSION_ENDED = "the session ended"
LISTENER_CLOSED = "the MCP listener closed"


class StatusNotification(types.TaskStatusNotification):
    """The SDK's notification, keeping ``ttl`` when it is null: the field is required (null is
    "kept as long as the runtime"), and the session serializes without nulls."""

    @model_serializer(mode="wrap")
    def _with_ttl(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out: dict[str, Any] = handler(self)
        if isinstance(out.get("params"), dict):
            out["params"].setdefault("ttl", self.params.ttl)
        return out


class StatusFollowers:
    """The status followers of one listener (bounded: one per task a live session created)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._running: set[asyncio.Task[None]] = set()

    def __len__(self) -> int:
        return len(self._running)

    def start(self, run: Run, session: ServerSession, after_seq: int) -> None:
        """Follow ``run`` for ``session`` from event ``after_seq`` (the last one before its spawn)."""
        if session.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return  # a single-exchange request: no session, no stream to send on, no tasks
        of_session = _of_session(session)
        if of_session is None:
            return  # no way to learn when the session ends: follow nothing rather than leak
        follower = asyncio.ensure_future(self._follow(run, session, after_seq))
        for held in (self._running, of_session):
            held.add(follower)
            follower.add_done_callback(held.discard)

    async def close(self) -> None:
        """Stop every follower (the listener is closing)."""
        await _stop(self._running, LISTENER_CLOSED)

    async def _follow(self, run: Run, session: ServerSession, after_seq: int) -> None:
        why, sent = "the runtime is no longer held here", 0
        try:
            rt = await self._engine.open(run.runtime_id)
            await rt.fetch(run.handle)  # parked on disk: read off the event loop
            tracker = Tracker(run, view_of(rt.snapshot(run.handle)))
            async for event in closing(rt.watch(after_seq, STATUS_EVENTS, run.handle)):
                task = tracker.step(event)
                if task is None:
                    continue
                params = types.TaskStatusNotificationParams(**task.model_dump())
                # the SDK leaves TaskStatusNotification out of its ServerNotification union (types only)
                await session.send_notification(StatusNotification(params=params))  # type: ignore[arg-type]
                sent += 1
                if task.status in TERMINAL:
                    why = f"the task is {task.status}"
                    return
        except asyncio.CancelledError as exc:
            why = str(exc.args[0]) if exc.args else "cancelled"
            raise
        except DaemonError as exc:  # moved to another daemon, events no longer retained, fell behind
            why = str(exc)
        except Exception as exc:  # a notification is advisory: its failure ends the follower, nothing else
            why = f"failed: {exc!r}"
        finally:
            log.info("mcp task status follower ended",
                     extra={"task": tasks.task_id(run), "why": why, "notifications": sent})


class Tracker:
    """A task's status, read from its handle's events one by one."""

    def __init__(self, run: Run, view: View) -> None:
        self._run = run
        self._view = view
        self._last: types.TaskStatus = "working"  # what every task begins as

    def step(self, event: Event) -> types.Task | None:
        """The task after ``event`` when its status changed with it, else None."""
        self._view = seen(self._view, event)
        if event.type is EventType.TRANSITION and HandleState(event.to_state) in UNDECIDED:
            return None
        task = tasks.task_of(self._run, self._view, _at(event))
        if task.status == self._last:
            return None
        self._last = task.status
        return task


def seen(view: View, event: Event) -> View:
    """``view`` after ``event``: the handle as ``tasks/get`` would read it once that event committed."""
    if event.type is EventType.TRANSITION:
        state = HandleState(event.to_state)
        pending = view.pending if state is HandleState.SUSPENDED else None
        return dataclasses.replace(view, state=state, pending=pending)
    if event.type in (EventType.PENDING, EventType.ESCALATE):
        return dataclasses.replace(view, pending=event.pending)
    if event.type is EventType.CLOSED:
        return dataclasses.replace(view, state=HandleState.CLOSED, last_result=event.result)
    if event.type is EventType.RESULT:
        return dataclasses.replace(view, last_result=event.result)
    return view


def _of_session(session: ServerSession) -> set[asyncio.Task[None]] | None:
    """The followers ``session``'s connection started, stopped by the connection's teardown (client
    DELETE, idle expiry, listener stop). The SDK offers handlers the connection's ``exit_stack``
    and ``state`` for this, but its lowlevel request context reaches the connection only through
    the session's ``_connection``; without it (another SDK), None."""
    connection = getattr(session, "_connection", None)
    state, stack = getattr(connection, "state", None), getattr(connection, "exit_stack", None)
    if not isinstance(state, dict) or not isinstance(stack, AsyncExitStack):
        return None
    followers = state.get(SESSION_KEY)
    if not isinstance(followers, set):
        followers = state[SESSION_KEY] = set()
        stack.push_async_callback(_stop, followers, SESSION_ENDED)
    return followers


async def _stop(followers: set[asyncio.Task[None]], why: str) -> None:
    stopping = list(followers)
    for follower in stopping:
        follower.cancel(why)
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.gather(*stopping, return_exceptions=True)


def _at(event: Event) -> datetime | None:
    """When ``event`` committed (the task's ``lastUpdatedAt``); None (now) if unreadable."""
    try:
        return datetime.fromisoformat(event.at) if event.at else None
    except ValueError:
        return None

