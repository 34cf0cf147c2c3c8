"""The seam for what the pinned ``mcp`` SDK (2.3.0) does not implement: tasks.

The SDK models the 2025-11-25 specification's task types (``Task``, ``CreateTaskResult``,
``tasks/get``…) but leaves ``tasks/*`` out of its method tables on purpose, and routes a
``tools/call`` carrying ``task`` to the ordinary handler. This middleware — the SDK's own
``Server.middleware`` hook, which runs before method lookup — serves them:

* a ``tools/call`` with ``params.task`` starts the run and returns a ``CreateTaskResult`` at once;
* ``tasks/get``, ``tasks/result``, ``tasks/list``, ``tasks/cancel`` go to :class:`~.edge.Edge`;
* ``initialize`` advertises ``capabilities.tasks`` (list, cancel, task-augmented ``tools/call``).

Params are validated with the SDK's models and results serialized from them; no JSON-RPC is
written here. Everything else passes through untouched.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import INVALID_PARAMS
from pydantic import BaseModel, ValidationError

from .edge import Edge

TASKS_CAPABILITY: dict[str, Any] = {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}


class TaskBridge:
    """``Server.middleware`` serving the specification's tasks over :class:`Edge`."""

    def __init__(self, edge: Edge) -> None:
        self._edge = edge

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        method, params = ctx.method, ctx.params
        if ctx.request_id is None:  # a notification
            return await call_next(ctx)
        if method == "initialize":
            return _with_tasks(await call_next(ctx))
        if method == "tools/call" and isinstance(params, dict) and params.get("task") is not None:
            call = _params(types.CallToolRequestParams, params)
            return _wire(await self._edge.create_task(ctx, call))
        if method == "tasks/get":
            return _wire(await self._edge.get_task(ctx, _params(types.GetTaskRequestParams, params).task_id))
        if method == "tasks/result":
            task_id = _params(types.GetTaskPayloadRequestParams, params).task_id
            return await self._edge.task_result(ctx, task_id)
        if method == "tasks/list":
            cursor = _params(types.PaginatedRequestParams, params or {}).cursor
            return _wire(await self._edge.list_tasks(ctx, cursor))
        if method == "tasks/cancel":
            task = _params(types.CancelTaskRequestParams, params).task_id
            return _wire(await self._edge.cancel_task(ctx, task))
        return await call_next(ctx)


def _params(model: type[Any], params: Any) -> Any:
    try:
        return model.model_validate(params or {}, by_name=False)
    except ValidationError as exc:
        raise MCPError(INVALID_PARAMS, f"invalid params: {exc.errors()[0].get('msg', 'malformed')}") from exc


def _wire(result: BaseModel) -> dict[str, Any]:
    dumped: dict[str, Any] = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    for task in (dumped, dumped.get("task"), *dumped.get("tasks", ())):
        if isinstance(task, dict) and "taskId" in task:
            task.setdefault("ttl", None)  # required, null = kept as long as the runtime (dropped as None)
    return dumped


def _with_tasks(result: HandlerResult) -> HandlerResult:
    if isinstance(result, dict) and isinstance(result.get("capabilities"), dict):
        result["capabilities"]["tasks"] = TASKS_CAPABILITY
    return result
