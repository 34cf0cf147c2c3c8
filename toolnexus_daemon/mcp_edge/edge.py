"""The MCP requests, as engine verbs: ``tools/list``, ``tools/call`` and the ``tasks/*`` family.

Every handler reads the engine as the gRPC servicer does, with the operator's authority: an
exposed runtime is one the operator chose to offer (``--mcp-expose``), so its runtime key is not
asked for — the listener's bearer token is what guards it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS

from ..engine.commit.ownership import Moved
from ..engine.verbs.engine import Engine
from ..errors import DaemonError, InvalidArgument, NotFound
from ..model import Status, TaskResult
from . import runs, tasks
from .exposed import PROMPT_SCHEMA, RESULT_SCHEMA, Exposure, Offered
from .runs import RELATED_TASK, Run
from .status import StatusFollowers
from .verbs import Remote, Verbs

PAGE = 100
RECOVERING = "the daemon is recovering its runtimes; retry shortly"
Ctx = ServerRequestContext[Any, Any]


class Edge:
    """What the MCP server does, over one engine and the runtimes it exposes."""

    def __init__(self, engine: Engine, exposed: tuple[str, ...], ready: Callable[[], bool],
                 remote: Remote | None = None) -> None:
        self._engine = engine
        self._verbs = Verbs(engine, remote)
        self.exposure = Exposure(self._verbs, exposed)
        self._ready = ready
        self.followers = StatusFollowers(engine)

    # ------------------------------------------------------------------ tools

    async def list_tools(self, ctx: Ctx,
                         params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        self._require_ready()
        execution = types.ToolExecution(task_support="optional")
        tools = [types.Tool(name=o.tool, description=o.does or f"the {o.agent} agent",
                            input_schema=PROMPT_SCHEMA, output_schema=RESULT_SCHEMA, execution=execution)
                 for o in await self.exposure.offered()]
        return types.ListToolsResult(tools=tools)

    async def call_tool(self, ctx: Ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        """Run the agent and answer with its text; suspensions are asked through elicitation."""
        offered, prompt = await self._called(params.name, params.arguments)
        run, seq = await self._start(offered, prompt)
        follower = self._follow(run, ctx, seq)
        try:
            result = await self._settle(run, runs.asking(ctx.session, ctx.request_id))
        finally:
            if follower is not None:
                follower.cancel()
        return tool_result(run, result)

    async def _called(self, name: str, arguments: dict[str, Any] | None) -> tuple[Offered, str]:
        self._require_ready()
        offered = await self.exposure.find(name)
        if offered is None:
            raise MCPError(INVALID_PARAMS,
                           f"unknown tool {name[:200]!r}: tools/list names the agents offered")
        prompt = (arguments or {}).get("prompt")
        if not isinstance(prompt, str) or not prompt.strip():
            raise MCPError(INVALID_PARAMS, f"{name}: arguments.prompt must be a non-empty string")
        return offered, prompt

    async def _start(self, offered: Offered, prompt: str) -> tuple[Run, int | None]:
        try:
            seq = await self._verbs.last_seq(offered.runtime_id)
            return await runs.start(self._verbs, offered, prompt), seq
        except DaemonError as exc:
            raise _mcp_error(exc) from exc

    async def _settle(self, run: Run, ask: runs.Asking) -> TaskResult:
        try:
            return await runs.settle(self._verbs, run, ask)
        except DaemonError as exc:
            raise _mcp_error(exc) from exc

    def _follow(self, run: Run, ctx: Ctx, seq: int | None) -> asyncio.Task[None] | None:
        """Progress for a run held here, when the client asked for it (``seq``: None elsewhere)."""
        if seq is None or not (ctx.meta or {}).get("progress_token"):
            return None
        return asyncio.ensure_future(_quietly(runs.follow(self._engine, run, ctx.session, seq)))

    # ------------------------------------------------------------------ tasks

    async def create_task(self, ctx: Ctx, params: types.CallToolRequestParams) -> types.CreateTaskResult:
        """A task-augmented ``tools/call``: the run starts and its task comes back at once."""
        offered, prompt = await self._called(params.name, params.arguments)
        run, seq = await self._start(offered, prompt)
        if seq is not None:  # held here: its status changes are sent to this session as they happen
            self.followers.start(run, ctx.session, seq)
        return types.CreateTaskResult(task=await self._task(run))

    async def get_task(self, ctx: Ctx, task_id: str) -> types.GetTaskResult:
        task = await self._task(self._run_of(task_id))
        return types.GetTaskResult(**task.model_dump())

    async def task_result(self, ctx: Ctx, task_id: str) -> dict[str, Any]:
        """What the ``tools/call`` would have answered, once the task is done (asking the client,
        when it declared elicitation, while the agent waits for an answer)."""
        run = self._run_of(task_id)
        result = await self._settle(run, runs.asking(ctx.session, ctx.request_id, task_id))
        out = tool_result(run, result).model_dump(by_alias=True, mode="json", exclude_none=True)
        out["_meta"] = {**out.get("_meta", {}), RELATED_TASK: {"taskId": task_id}}
        return out

    async def list_tasks(self, ctx: Ctx, cursor: str | None) -> types.ListTasksResult:
        self._require_ready()
        found: list[types.Task] = []
        for rid in self.exposure.runtime_ids:
            with contextlib.suppress(DaemonError):  # not created yet, or its owner unreachable
                found.extend(tasks.task_of(Run(rid, h.id), h) for h in await self._verbs.views(rid)
                             if h.depth == 1)
        start = _offset(cursor)
        page = found[start:start + PAGE]
        more = str(start + PAGE) if start + PAGE < len(found) else None
        return types.ListTasksResult(tasks=page, next_cursor=more)

    async def cancel_task(self, ctx: Ctx, task_id: str) -> types.CancelTaskResult:
        run = self._run_of(task_id)
        task = await self._task(run)
        if task.status in ("completed", "failed", "cancelled"):
            raise MCPError(INVALID_PARAMS, f"task {task_id} is already {task.status}: only a working or "
                                           "input_required task can be cancelled")
        try:
            with contextlib.suppress(DaemonError):  # an idle (queued) handle has nothing to interrupt
                await self._verbs.interrupt(run.runtime_id, run.handle)
            await self._verbs.close(run.runtime_id, run.handle)
        except DaemonError as exc:
            raise _mcp_error(exc) from exc
        return types.CancelTaskResult(**(await self._task(run)).model_dump())

    async def _task(self, run: Run) -> types.Task:
        self._require_ready()
        try:
            return tasks.task_of(run, await self._verbs.view(run.runtime_id, run.handle))
        except DaemonError as exc:
            raise _mcp_error(exc) from exc

    def _run_of(self, task_id: str) -> Run:
        self._require_ready()
        try:
            return tasks.run_of(task_id, self.exposure.runtime_ids)
        except InvalidArgument as exc:
            raise MCPError(INVALID_PARAMS, str(exc)) from exc

    async def close(self) -> None:
        """Stop what outlives a request: the tasks' status followers."""
        await self.followers.close()

    def _require_ready(self) -> None:
        if not self._ready():
            raise MCPError(INTERNAL_ERROR, RECOVERING)


def tool_result(run: Run, result: TaskResult) -> types.CallToolResult:
    """The agent's result as MCP sees it: its text, and ``[status] text`` flagged as an error
    unless it is ``done``; a pending one says which request waits and how to answer it."""
    structured: dict[str, Any] = {"status": str(result.status), "text": result.text, "turns": result.turns,
                                  "total_tokens": result.total_tokens}
    text = result.text
    if result.status is Status.PENDING and result.pending is not None:
        request = result.pending
        structured.update(request_id=request.id, kind=request.kind, prompt=request.prompt,
                          runtime_id=run.runtime_id, handle=run.handle, task_id=tasks.task_id(run))
        how = f"toolnexus-daemon answer {request.id} --approve (or --decline), or a gRPC Resume"
        if request.answer_url:
            structured["answer_url"] = request.answer_url
            how += f", or the link {request.answer_url}"
        structured["how_to_answer"] = how
        text = f"{request.prompt} (request {request.id} waits for an answer: {how})"
    if result.status is not Status.DONE:
        text = f"[{result.status}] {text}"
    return types.CallToolResult(content=[types.TextContent(text=text)], structured_content=structured,
                                is_error=result.status is not Status.DONE)


def _mcp_error(exc: DaemonError) -> MCPError:
    if isinstance(exc, Moved):
        return MCPError(INTERNAL_ERROR, str(exc))
    if isinstance(exc, InvalidArgument | NotFound):
        return MCPError(INVALID_PARAMS, str(exc))
    return MCPError(INTERNAL_ERROR, str(exc))


def _offset(cursor: str | None) -> int:
    if not cursor:
        return 0
    if not cursor.isdigit():
        raise MCPError(INVALID_PARAMS, "invalid cursor: pass back the nextCursor of the previous page")
    return int(cursor)


async def _quietly(work: Any) -> None:
    """A progress follower: the call it follows must not fail because a notification did."""
    with contextlib.suppress(Exception):
        await work
