"""MCP servers as a tool source (docs/mcp.md): listing at ``New`` and the executor of source ``mcp``.

At ``New`` each server of an agent's ``mcp_servers`` is asked for its tools (``tools/list``,
paged); each becomes a ToolDef named ``<server>__<tool>`` (characters outside ``[A-Za-z0-9_-]``
become ``_``, at most 64) that carries where it came from, so the registry stores what was listed
and a restart resumes without listing again. A call is ``tools/call`` with the model's arguments
and ``_meta.toolnexus/call_id`` (the call's action id: the same for every re-invocation of one
call, so the server can deduplicate on it) and, when tracing is on, ``_meta.traceparent`` (the
W3C trace context of the call's ``execute_tool`` span).

An ``elicitation/create`` during the call suspends it durably (``mcp_elicit``): the executor
returns the Request and keeps the call open on its session. When the answer comes, the engine
re-invokes the call with it; if the call is still open, the answer goes back on it; if not (the
daemon restarted, the server or session went away, the call was held too long), the call is
made again and the server's same elicitation is answered from the recorded answer. A protocol
error, a timeout or a dead server is an error result naming server and tool; for an
``on_crash: "ask"`` server, a call that may have reached the server raises ``OutcomeUnknown``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
from collections import OrderedDict
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field, replace

from mcp_types import (
    CallToolResult,
    ElicitRequest,
    ElicitRequestParams,
    ElicitResult,
    InputResponses,
    ListRootsRequest,
    ListRootsResult,
    Tool,
)

from ..config_mcp import McpConfig
from ..envexpand import expand_headers
from ..errors import InvalidArgument, Unavailable
from ..model import AgentDef, Answer, McpServer, McpTarget, OnCrash, ToolDef, ToolResult, ToolSource
from . import mcp_elicit
from .base import OutcomeUnknown, ToolInvocation
from .http_tool import DEFAULT_MAX_OUTPUT_CHARS
from .mcp_result import tool_result
from .mcp_session import Endpoint, InvalidResult, Session, Sessions, Unreachable, reason

log = logging.getLogger("toolnexus_daemon.tools.mcp")

DEFAULT_TIMEOUT_MS = 30_000
MAX_NAME = 64
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
# an open call waiting for an answer is held this long at most; later, the answer re-invokes it
HOLD_S = 900.0
# open calls held at once (each holds a session); the oldest is let go past it
MAX_HELD = 64
# answers remembered per call (by action id) for a call that asks again after its session went
# away; bounded, and lost at a restart (the last answer is durable in the engine either way)
MAX_REMEMBERED = 1024
# a listing is a peer's reply: bounded like one
MAX_LISTED_TOOLS = 256
MAX_DESCRIPTION_CHARS = 4096
MAX_SCHEMA_CHARS = 65_536
# input-required rounds one call may take (each answered question is one round)
MAX_INPUT_ROUNDS = 16


def offered_name(server: str, tool: str) -> str:
    """``<server>__<tool>`` as the model sees it."""
    return _UNSAFE.sub("_", f"{server}__{tool}")[:MAX_NAME]


@dataclass
class _Elicited:
    params: ElicitRequestParams
    reply: asyncio.Future[ElicitResult]


@dataclass
class _OpenCall:
    """One ``tools/call`` in flight on its session; what it says comes through ``events``."""

    action_id: str
    session: Session
    events: asyncio.Queue[_Elicited | CallToolResult | BaseException] = field(default_factory=asyncio.Queue)
    task: asyncio.Task[None] | None = None
    waiting: _Elicited | None = None
    hold: asyncio.TimerHandle | None = None
    # the server asked something during this call (so it ran, whatever became of it)
    asked: bool = False

    async def elicited(self, params: ElicitRequestParams) -> ElicitResult:
        reply: asyncio.Future[ElicitResult] = asyncio.get_running_loop().create_future()
        self.events.put_nowait(_Elicited(params, reply))
        return await reply


class McpExecutor:
    """``ToolExecutor`` for source ``mcp``, and the lister ``New`` calls (``ToolLister``)."""

    def __init__(
        self,
        config: McpConfig | None = None,
        env: Mapping[str, str] | None = None,
        *,
        max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS,
    ) -> None:
        self._config = config
        self._env: Mapping[str, str] = {} if env is None else env
        self._max_output = max_output_chars
        self.sessions = Sessions(self._changed)
        self._open: OrderedDict[str, _OpenCall] = OrderedDict()
        self._remembered: OrderedDict[str, dict[str, Answer]] = OrderedDict()
        self._letting_go: set[asyncio.Task[None]] = set()
        # endpoints whose tools changed (notifications/tools/list_changed) since they were listed
        self.changed: set[Endpoint] = set()
        # told which servers changed, to list them again for later turns (the engine's refresh)
        self.on_tools_changed: Callable[[Callable[[McpServer], bool]], None] | None = None

    # ------------------------------------------------------------------ where a server is

    def endpoint(self, server: McpServer) -> Endpoint:
        """How to reach ``server``: its URL, or its entry in ``--mcp-config``."""
        if server.url:
            headers = expand_headers(server.headers, self._env)
            return Endpoint(url=server.url, headers=tuple(sorted(headers.items())))
        entry = self._config.servers.get(server.name) if self._config is not None else None
        if entry is None:
            raise Unreachable(f'"{server.name}" is not in --mcp-config')
        mode = "auto" if entry.protocol == "auto" else "legacy"
        if entry.stdio:
            env = tuple(sorted(entry.env.items()))
            return Endpoint(command=entry.command, args=entry.args, env=env, mode=mode)
        # the operator's own file: its ${ENV} references may read the daemon's whole environment
        headers = expand_headers(entry.headers, os.environ)
        return Endpoint(url=entry.url, headers=tuple(sorted(headers.items())), mode=mode)

    def problems(self, agents: Sequence[AgentDef]) -> list[str]:
        """A server named without a URL that ``--mcp-config`` does not have, one problem each."""
        out: list[str] = []
        servers = self._config.servers if self._config is not None else {}
        for agent in agents:
            for server in agent.mcp_servers:
                if not server.url and server.name not in servers:
                    where = (
                        f"is not in --mcp-config {self._config.path}"
                        if self._config is not None
                        else "is not configured: the daemon was started without --mcp-config"
                    )
                    out.append(
                        f'agent "{agent.name}": mcp server "{server.name}" has no url and {where}; '
                        "give its url, or have the operator add it to the --mcp-config file"
                    )
        return out

    # ------------------------------------------------------------------ listing at New

    async def expand(self, agents: Sequence[AgentDef]) -> list[AgentDef]:
        """``agents`` with the tools of their MCP servers added; UNAVAILABLE naming a server that
        cannot be reached, INVALID_ARGUMENT naming an allow-listed tool the server lacks."""
        listed: dict[Endpoint, list[Tool]] = {}
        out: list[AgentDef] = []
        problems: list[str] = []
        for agent in agents:
            tools = list(agent.tools)
            for server in agent.mcp_servers:
                found = await self._listing(agent, server, listed)
                tools += self._offered(agent, server, found, problems)
            out.append(replace(agent, tools=tuple(tools)) if agent.mcp_servers else agent)
        if problems:
            raise InvalidArgument(
                "invalid registry: " + "; ".join(f"{i}) {p}" for i, p in enumerate(problems, 1))
            )
        return out

    async def _listing(
        self, agent: AgentDef, server: McpServer, listed: dict[Endpoint, list[Tool]]
    ) -> list[Tool]:
        try:
            endpoint = self.endpoint(server)
            if endpoint not in listed:
                # connecting has its own bound; timeout_ms is for the listing itself, as for a call
                listed[endpoint] = await self.list_tools(endpoint, _timeout_s(server))
            return listed[endpoint]
        except (Unreachable, TimeoutError, OSError) as exc:
            why = "timed out" if isinstance(exc, TimeoutError) else str(exc)
            raise Unavailable(
                f'mcp server "{server.name}" of agent "{agent.name}" cannot be reached: {why}'
            ) from exc

    async def list_tools(self, endpoint: Endpoint, timeout_s: float) -> list[Tool]:
        session = await self.sessions.acquire(endpoint, timeout_s)  # (Session.open bounds the connect)
        keep = False
        try:
            async with asyncio.timeout(timeout_s):
                tools = await session.list_tools()
            keep = True
            self.changed.discard(endpoint)
            return tools
        except Unreachable:
            raise
        except Exception as exc:
            raise Unreachable(f"tools/list failed: {reason(exc)}") from exc
        finally:
            await self.sessions.release(session, keep=keep)

    @staticmethod
    def _offered(agent: AgentDef, server: McpServer, found: list[Tool], problems: list[str]) -> list[ToolDef]:
        """The ToolDefs of the listed tools the agent gets; a server's listing is a peer's reply,
        so its size is bounded: tool count, description length, schema size."""
        names = {t.name for t in found}
        for missing in [t for t in server.tools if t not in names]:
            problems.append(
                f'agent "{agent.name}": mcp server "{server.name}" has no tool "{missing[:128]}" '
                f"(it lists {', '.join(sorted(names))[:400] or 'none'})"
            )
        allowed = set(server.tools)
        chosen = [t for t in found if not allowed or t.name in allowed]
        where = f'agent "{agent.name}": mcp server "{server.name}"'
        if len(chosen) > MAX_LISTED_TOOLS:
            problems.append(
                f"{where} lists {len(chosen)} tools; the limit is {MAX_LISTED_TOOLS} "
                "(name the ones to offer in its tools)"
            )
            return []
        out: list[ToolDef] = []
        for t in chosen:
            schema = dict(t.input_schema)
            size = len(json.dumps(schema, separators=(",", ":")))
            if size > MAX_SCHEMA_CHARS:
                problems.append(
                    f'{where}: tool "{t.name[:128]}" has an input schema of {size} characters; '
                    f"the limit is {MAX_SCHEMA_CHARS}"
                )
                continue
            out.append(
                ToolDef(
                    name=offered_name(server.name, t.name),
                    description=(t.description or t.title or "")[:MAX_DESCRIPTION_CHARS],
                    input_schema=schema,
                    source=ToolSource.MCP,
                    on_crash=server.on_crash,
                    mcp=McpTarget(server=server, tool=t.name),
                )
            )
        return out

    def _changed(self, endpoint: Endpoint) -> None:
        self.changed.add(endpoint)
        if self.on_tools_changed is not None:
            self.on_tools_changed(lambda server: self._reaches(server, endpoint))

    def _reaches(self, server: McpServer, endpoint: Endpoint) -> bool:
        try:
            return self.endpoint(server) == endpoint
        except Unreachable:
            return False

    # ------------------------------------------------------------------ calls

    async def invoke(self, inv: ToolInvocation) -> ToolResult:
        target = inv.tool.mcp
        if target is None:
            return ToolResult(output=f'mcp tool "{inv.tool.name}" has no server', is_error=True)
        if inv.answer is not None:
            self._remember(inv.action_id, inv.answer)
        call = self._open.pop(inv.action_id, None)
        if call is not None:
            _cancel_hold(call)
            waiting = call.waiting
            live = call.session.alive and call.task is not None and not call.task.done()
            if (
                waiting is not None
                and live
                and mcp_elicit.answers(inv.answer, mcp_elicit.request_id(inv.action_id, waiting.params))
            ):
                assert inv.answer is not None
                call.waiting = None
                waiting.reply.set_result(mcp_elicit.result(inv.answer, waiting.params))
                return await self._drive(inv, target, call)
            await self._abandon(call)  # not the answer it waits for: start over
        started = await self._start(inv, target)
        if isinstance(started, ToolResult):
            return started
        return await self._drive(inv, target, started)

    async def _start(self, inv: ToolInvocation, target: McpTarget) -> _OpenCall | ToolResult:
        """Send ``tools/call`` on a session of the server (the call's events follow)."""
        try:
            endpoint = self.endpoint(target.server)
            session = await self.sessions.acquire(endpoint, _timeout_s(target.server))
        except (Unreachable, TimeoutError, OSError) as exc:
            why = "no session within the timeout" if isinstance(exc, TimeoutError) else str(exc)
            return _error(target, f"unreachable: {why}")
        call = _OpenCall(inv.action_id, session)
        session.on_elicit = call.elicited
        meta = {"toolnexus/call_id": call.action_id}
        if inv.traceparent:  # the call's execute_tool span, when tracing is on (docs/observability.md)
            meta["traceparent"] = inv.traceparent
        args = inv.arguments if isinstance(inv.arguments, dict) else {}
        call.task = asyncio.create_task(self._run(call, target.tool, args, meta))
        return call

    @staticmethod
    async def _run(
        call: _OpenCall, tool: str, args: Mapping[str, object], meta: Mapping[str, object]
    ) -> None:
        try:
            call.events.put_nowait(await _rounds(call, tool, args, meta))
        except BaseException as exc:  # the call's end, whatever it is, is an event the driver reads
            call.events.put_nowait(exc)
            if isinstance(exc, asyncio.CancelledError):
                raise

    async def _drive(self, inv: ToolInvocation, target: McpTarget, call: _OpenCall) -> ToolResult:
        """Read the call's events until it ends or asks something nobody has answered yet."""
        timeout_s = _timeout_s(target.server)
        done = renewed = False
        try:
            while True:
                try:
                    async with asyncio.timeout(timeout_s):
                        event = await call.events.get()
                except TimeoutError:
                    return self._lost(inv, target, f"no reply within {int(timeout_s * 1000)} ms")
                if isinstance(event, _Elicited):
                    call.asked = True
                    known = self._known_answer(inv, event.params)
                    if known is not None:
                        event.reply.set_result(mcp_elicit.result(known, event.params))
                        continue
                    done = True  # held open: the answer decides what becomes of it
                    self._hold(call, event)
                    return ToolResult(
                        output="",
                        pending=mcp_elicit.request(
                            inv.action_id, target.server.name, target.tool, event.params
                        ),
                    )
                done = True
                if isinstance(event, CallToolResult):
                    await self.sessions.release(call.session, keep=True)
                    self._forget(call.action_id)
                    return tool_result(event, self._max_output)
                if isinstance(event, InvalidResult):  # answered, wrongly: an error the model reads
                    await self.sessions.release(call.session, keep=True)
                    self._forget(inv.action_id)
                    return _error(target, f"returned a result its output schema refuses: {str(event)[:1000]}")
                await self.sessions.release(call.session, keep=False)
                if call.session.expired and not call.asked and not renewed:
                    # the server no longer knew the session (it restarted): it read nothing, so the
                    # call is made again on a new session, once
                    renewed, done = True, False
                    started = await self._start(inv, target)
                    if isinstance(started, ToolResult):
                        done = True
                        return started
                    call = started
                    continue
                return self._failed(inv, target, event)
        finally:
            if not done:  # cancelled (the tool's deadline) or timed out: the call is let go
                await self._abandon(call)

    def _known_answer(self, inv: ToolInvocation, params: ElicitRequestParams) -> Answer | None:
        """The recorded answer to this very question of this call, if there is one."""
        rid = mcp_elicit.request_id(inv.action_id, params)
        if mcp_elicit.answers(inv.answer, rid):
            return inv.answer
        remembered = self._remembered.get(inv.action_id, {})
        return next((a for a in remembered.values() if mcp_elicit.answers(a, rid)), None)

    def _hold(self, call: _OpenCall, event: _Elicited) -> None:
        call.waiting = event
        loop = asyncio.get_running_loop()
        call.hold = loop.call_later(HOLD_S, lambda: self._expire(call))
        self._open[call.action_id] = call
        while len(self._open) > MAX_HELD:
            _, oldest = self._open.popitem(last=False)
            _cancel_hold(oldest)
            self._background(self._abandon(oldest))

    def _background(self, work: Coroutine[object, object, None]) -> None:
        """Run ``work`` on its own, keeping a reference until it ends (a bare task may be collected)."""
        task = asyncio.get_running_loop().create_task(work)
        self._letting_go.add(task)
        task.add_done_callback(self._letting_go.discard)

    def _expire(self, call: _OpenCall) -> None:
        if self._open.get(call.action_id) is call:
            del self._open[call.action_id]
            self._background(self._abandon(call))

    async def _abandon(self, call: _OpenCall) -> None:
        """Let an open call go: its elicitation is cancelled, its session closed."""
        if call.waiting is not None and not call.waiting.reply.done():
            call.waiting.reply.set_result(ElicitResult(action="cancel"))
        if call.task is not None and not call.task.done():
            call.task.cancel()
            with contextlib.suppress(BaseException):
                await call.task
        if call.session.on_elicit is not None:
            await self.sessions.release(call.session, keep=False)

    def _remember(self, action_id: str, answer: Answer) -> None:
        self._remembered.setdefault(action_id, {})[answer.id] = answer
        self._remembered.move_to_end(action_id)
        while len(self._remembered) > MAX_REMEMBERED:
            self._remembered.popitem(last=False)

    def _forget(self, action_id: str) -> None:
        self._remembered.pop(action_id, None)

    def _failed(self, inv: ToolInvocation, target: McpTarget, exc: BaseException) -> ToolResult:
        return self._lost(inv, target, reason(exc))

    @staticmethod
    def _lost(inv: ToolInvocation, target: McpTarget, why: str) -> ToolResult:
        """The call got no result: an error result, or for an ``ask`` server ``OutcomeUnknown``
        (the call was sent, so the tool may have acted)."""
        text = f'mcp server "{target.server.name}" tool "{target.tool}" failed: {why}'
        if inv.tool.on_crash is OnCrash.ASK:
            raise OutcomeUnknown(text)
        return ToolResult(output=text, is_error=True)

    async def aclose(self) -> None:
        for call in list(self._open.values()):
            _cancel_hold(call)
            await self._abandon(call)
        self._open.clear()
        await self.sessions.aclose()


async def _rounds(
    call: _OpenCall, tool: str, args: Mapping[str, object], meta: Mapping[str, object]
) -> CallToolResult:
    """``tools/call`` until it completes. On the 2026-07-28 protocol a server asks with an
    input-required result instead of ``elicitation/create``: each elicitation it carries goes the
    same way as one on the open call (answered from the record, or suspended), and the call is
    retried with the answers and the server's request state. Nothing is held open on the server
    meanwhile; after a restart the first round simply asks again."""
    responses: InputResponses | None = None
    state: str | None = None
    for _ in range(MAX_INPUT_ROUNDS):
        result = await call.session.call(tool, args, meta, responses, state)
        if isinstance(result, CallToolResult):
            return result
        responses = {}
        for key, asked in (result.input_requests or {}).items():
            if isinstance(asked, ElicitRequest):
                responses[key] = await call.elicited(asked.params)
            elif isinstance(asked, ListRootsRequest):
                responses[key] = ListRootsResult(roots=[])
            else:  # sampling: the daemon does not lend its model to a server
                raise Unreachable(
                    f"the server asked to sample the client's model ({asked.method}), "
                    "which the daemon refuses"
                )
        state = result.request_state
    raise Unreachable(f"the server asked for input more than {MAX_INPUT_ROUNDS} times")


def _error(target: McpTarget, why: str) -> ToolResult:
    return ToolResult(output=f'mcp server "{target.server.name}" tool "{target.tool}" {why}', is_error=True)


def _cancel_hold(call: _OpenCall) -> None:
    if call.hold is not None:
        call.hold.cancel()
        call.hold = None


def _timeout_s(server: McpServer) -> float:
    return (server.timeout_ms or DEFAULT_TIMEOUT_MS) / 1000
