"""Durable MCP tasks: a task-augmented call returns a task at once; its id outlives the daemon."""

from __future__ import annotations

import asyncio
from typing import Any

import mcp_types as types
import pytest
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError

from tests.mcp_server.conftest import McpDaemon, call_as_task, mcp_session
from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_devtools import ScriptedModelServer
from toolnexus_devtools.model_server import Reply, chat_response

RELATED_TASK = "io.modelcontextprotocol/related-task"


async def _create(session: ClientSession, tool: str, prompt: str) -> types.Task:
    task: types.Task = await call_as_task(session, tool, prompt)
    return task


async def _get(session: ClientSession, task_id: str) -> types.GetTaskResult:
    request = types.GetTaskRequest(params=types.GetTaskRequestParams(task_id=task_id))
    return await session.send_request(request, types.GetTaskResult)


async def _until(session: ClientSession, task_id: str, status: str) -> types.GetTaskResult:
    for _ in range(100):
        task = await _get(session, task_id)
        if task.status == status:
            return task
        await asyncio.sleep(0.1)
    raise AssertionError(f"task {task_id} never became {status}; last {task.status}")


async def _result(session: ClientSession, task_id: str) -> types.CallToolResult:
    request = types.GetTaskPayloadRequest(params=types.GetTaskPayloadRequestParams(task_id=task_id))
    return await session.send_request(request, types.CallToolResult)


async def test_a_task_works_then_completes_and_its_result_is_the_calls(served: McpDaemon,
                                                                       model: ScriptedModelServer) -> None:
    model.push(Reply(body=chat_response(content="ok", usage=(2, 1, 3)), delay=1.5))  # a slow model call
    async with mcp_session(served.url) as session:
        task = await _create(session, "writer", "say ok")
        assert (task.task_id, task.status) == ("demo:root/writer.1", "working")
        assert (await _get(session, task.task_id)).status == "working"
        await _until(session, task.task_id, "completed")
        result = await _result(session, task.task_id)
        listed = await session.send_request(types.ListTasksRequest(), types.ListTasksResult)
    assert (result.is_error, result.structured_content["text"]) == (False, "ok")
    assert [t.task_id for t in listed.tasks] == [task.task_id]


async def test_a_suspended_task_survives_kill_9_and_is_answered_through_tasks_result(
        served: McpDaemon) -> None:
    async with mcp_session(served.url) as session:
        task = await _create(session, "approver", "do the thing")
        waiting = await _until(session, task.task_id, "input_required")
    assert "approve?" in (waiting.status_message or "")

    served.daemon.kill9()
    served.daemon.start()
    asked: list[str] = []

    async def elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"approve": True})

    async with mcp_session(served.url, elicitation_callback=elicit) as session:
        assert (await _get(session, task.task_id)).status == "input_required"
        result = await _result(session, task.task_id)
        done = await _get(session, task.task_id)
    assert asked == ["approve?"]
    assert (result.is_error, result.structured_content["text"]) == (False, "action performed")
    assert done.status == "completed"


async def test_an_elicitation_sent_during_tasks_result_names_its_task(served: McpDaemon) -> None:
    """The specification: a request a task depends on carries ``_meta`` related-task with the
    task's id; the SDK client hands the request's ``_meta`` to the elicitation callback."""
    metas: list[Any] = []

    async def elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        metas.append(ctx.meta)
        return types.ElicitResult(action="accept", content={"approve": True})

    async with mcp_session(served.url, elicitation_callback=elicit) as session:
        task = await _create(session, "approver", "do the thing")
        await _until(session, task.task_id, "input_required")
        result = await _result(session, task.task_id)
    assert result.structured_content["text"] == "action performed"
    assert metas == [{RELATED_TASK: {"taskId": task.task_id}}]


async def test_a_cancelled_task_interrupts_and_closes_its_handle(served: McpDaemon) -> None:
    async with mcp_session(served.url) as session:
        task = await _create(session, "approver", "do the thing")
        await _until(session, task.task_id, "input_required")
        cancel = types.CancelTaskRequest(params=types.CancelTaskRequestParams(task_id=task.task_id))
        cancelled = await session.send_request(cancel, types.CancelTaskResult)
        assert cancelled.status == "cancelled"
        assert (await _get(session, task.task_id)).status == "cancelled"
        with pytest.raises(Exception, match="already cancelled"):
            await session.send_request(cancel, types.CancelTaskResult)
    snap = served.stub.Snapshot(pb.SnapshotRequest(runtime_id="demo", handle="root/approver.1"), timeout=5,
                                metadata=served.grpc_metadata())
    assert snap.state == "closed"


async def test_an_unknown_task_id_is_invalid_params(served: McpDaemon) -> None:
    async with mcp_session(served.url) as session:
        for bad in ("nope", "other:root/writer.1", "demo:root/nobody.9"):
            with pytest.raises(MCPError, match="task id|not found|no handle|unknown"):
                await _get(session, bad)
