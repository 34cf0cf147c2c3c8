"""One agent run behind an MCP ``tools/call`` (or a task): started as the ``task`` tool starts a
subagent — a child of ``root``, spawned and woken with the prompt in one commit — then settled.

Settling waits for the handle's next result. When the agent suspends and the client declared
elicitation, the suspension's Request is asked on the open call (``elicitation/create``): URL
mode with the answer link for an ``authorization`` request the client can open (the link answers
it), form mode otherwise (an ``approve`` boolean plus the Request's data schema when it carries
one); the reply becomes the ``Resume``. Asked while serving ``tasks/result``, the question
carries the task's id in ``_meta`` (``io.modelcontextprotocol/related-task``). A client without
elicitation gets the pending status as the result. Either way the suspension is durable: a client
that goes away leaves it answerable by ``Resume``, the CLI, ``ListPending`` or its link.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, cast

import mcp_types as types
from mcp.server.session import ServerSession
from mcp.shared.message import ServerMessageMetadata

from ..engine.verbs.engine import Engine
from ..errors import DaemonError
from ..model import Answer, EventType, HandleState, Request, Status, TaskResult
from .exposed import Offered
from .verbs import Verbs

log = logging.getLogger("toolnexus_daemon.mcp")

RELATED_TASK = "io.modelcontextprotocol/related-task"
# a client that keeps answering with what the agent refuses is asked this many times, then told
MAX_ASKS = 8
PROGRESS_EVENTS = frozenset({EventType.MODEL_CALL, EventType.TOOL_CALL})
# how often a run whose link the user was sent to is looked at until the link's answer is in
LINK_POLL_S = 0.25


@dataclass(frozen=True)
class Run:
    """An agent run: the handle it lives in (durable; the task id derives from it)."""

    runtime_id: str
    handle: str


@dataclass
class Asking:
    """How to reach the person behind the MCP client, if at all."""

    session: ServerSession | None  # None: no back-channel (or elicitation not declared)
    related_request_id: types.RequestId | None = None
    form: bool = False
    url: bool = False
    task_id: str | None = None  # asked while serving tasks/result: the task each question belongs to


def asking(session: ServerSession, request_id: types.RequestId | None, task_id: str | None = None) -> Asking:
    """What ``session``'s client declared: elicitation in form mode, URL mode, or neither."""
    caps = session.client_capabilities
    elicitation = caps.elicitation if caps is not None else None
    if elicitation is None or not session.can_send_request:
        return Asking(None)
    # a client that declared elicitation with no mode supports form mode (the specification's default)
    form = elicitation.form is not None or elicitation.url is None
    return Asking(session, request_id, form, elicitation.url is not None, task_id)


async def start(verbs: Verbs, offered: Offered, prompt: str) -> Run:
    """Spawn ``offered.agent`` under ``root`` and wake it with ``prompt``, durably, in one commit."""
    return Run(offered.runtime_id, await verbs.spawn_awake(offered.runtime_id, offered.agent, prompt))


async def settle(verbs: Verbs, run: Run, ask: Asking) -> TaskResult:
    """The run's result once it is not suspended — or, when nobody can be asked, its pending one."""
    result = await verbs.wait(run.runtime_id, run.handle)
    for _ in range(MAX_ASKS):
        if result.status is not Status.PENDING or result.pending is None or ask.session is None:
            return result
        result = await _asked(verbs, run, result.pending, ask)
    return result


async def _asked(verbs: Verbs, run: Run, request: Request, ask: Asking) -> TaskResult:
    """Ask ``request`` through elicitation and feed the reply back; the run's next result."""
    assert ask.session is not None
    link = request.answer_url if request.kind == "authorization" else None
    if link and ask.url:
        reply = await _elicit(ask, types.ElicitRequestURLParams(
            message=request.prompt, url=link, elicitation_id=request.id, _meta=_related(ask)))
        if reply.action == "accept":  # the user answers on the link's page: wait for that answer
            await _answered(verbs, run, request.id)
            return await verbs.wait(run.runtime_id, run.handle)
        answer = _refusal(request, reply.action)
    elif ask.form:
        reply = await _elicit(ask, types.ElicitRequestFormParams(
            message=request.prompt, requested_schema=_form(request), _meta=_related(ask)))
        answer = _answer(request, reply)
    else:  # URL mode only, and no link to send: the pending result says how to answer
        return await verbs.wait(run.runtime_id, run.handle)
    try:
        await verbs.resume(run.runtime_id, answer)
    except DaemonError as exc:  # answered meanwhile some other way, data that does not fit: read again
        log.info("mcp answer refused", extra={"runtime": run.runtime_id, "request": answer.id,
                                              "error": str(exc)})
    return await verbs.wait(run.runtime_id, run.handle)


async def _elicit(ask: Asking, params: types.ElicitRequestParams) -> types.ElicitResult:
    """``elicitation/create`` on the open request's stream — what the session's ``elicit_form`` and
    ``elicit_url`` send, with the request's ``_meta`` they cannot carry."""
    assert ask.session is not None
    return await ask.session.send_request(
        types.ElicitRequest(params=params), types.ElicitResult,
        metadata=ServerMessageMetadata(related_request_id=ask.related_request_id))


def _related(ask: Asking) -> types.RequestParamsMeta | None:
    """A question asked for a task names it (the specification's related-task ``_meta``)."""
    if ask.task_id is None:
        return None
    related = types.RelatedTaskMetadata(task_id=ask.task_id).model_dump(by_alias=True)
    return cast(types.RequestParamsMeta, {RELATED_TASK: related})


async def _answered(verbs: Verbs, run: Run, request_id: str) -> None:
    """Until the run no longer waits on ``request_id`` (for as long as the call stays open)."""
    while True:
        view = await verbs.view(run.runtime_id, run.handle)
        if view.state is not HandleState.SUSPENDED or view.pending is None or view.pending.id != request_id:
            return
        await asyncio.sleep(LINK_POLL_S)


def _form(request: Request) -> dict[str, Any]:
    """The form: ``approve`` plus the fields of the Request's data schema, when it carries one."""
    properties: dict[str, Any] = {"approve": {"type": "boolean", "title": "Approve",
                                              "description": request.prompt}}
    required = ["approve"]
    schema = _data_schema(request.data)
    if schema is not None:
        properties.update({k: v for k, v in schema.get("properties", {}).items() if k != "approve"})
        required += [k for k in schema.get("required", []) if k != "approve"]
    return {"type": "object", "properties": properties, "required": required}


def _data_schema(data: Any) -> dict[str, Any] | None:
    """A flat object schema in the Request's data: the data itself, or its ``requested_schema``
    or ``schema`` (an MCP elicitation a tool relayed, say)."""
    if not isinstance(data, dict):
        return None
    for candidate in (data.get("requested_schema"), data.get("schema"), data):
        if isinstance(candidate, dict) and candidate.get("type") == "object" \
                and isinstance(candidate.get("properties"), dict):
            return candidate
    return None


def _answer(request: Request, reply: types.ElicitResult) -> Answer:
    if reply.action != "accept":
        return _refusal(request, reply.action)
    content = dict(reply.content or {})
    approved = content.pop("approve", True) is not False
    data = content or None
    return Answer(id=request.id, ok=approved, data=data, reason=None if approved else "declined")


def _refusal(request: Request, action: str) -> Answer:
    return Answer(id=request.id, ok=False, reason="cancelled" if action == "cancel" else "declined")


async def follow(engine: Engine, run: Run, session: ServerSession, after_seq: int) -> None:
    """Progress notifications for the run's model and tool calls, until cancelled (a runtime held
    here: its event stream is read in process)."""
    rt = await engine.open(run.runtime_id)
    await rt.fetch(run.handle)  # parked on disk: read off the event loop
    count = 0
    async for event in closing(rt.watch(after_seq, PROGRESS_EVENTS, run.handle)):
        count += 1
        await session.report_progress(count, None, event.note or str(event.type))


async def closing(events: Any) -> AsyncIterator[Any]:
    """``events`` (an engine watch), closed however the reader stops (its subscription ends)."""
    try:
        async for event in events:
            yield event
    finally:
        await events.aclose()
