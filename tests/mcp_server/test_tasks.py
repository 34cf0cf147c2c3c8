"""Durable MCP tasks: a task-augmented call returns a task at once; its id outlives the daemon."""

from __future__ import annotations

import asyncio
import contextlib
import json
from datetime import datetime
from typing import Any

import mcp_types as types
import pytest
from mcp.client.extension import NotificationBinding
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError

from tests.mcp_server.conftest import McpDaemon, call_as_task, mcp_session
from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_devtools import ScriptedModelServer
from toolnexus_devtools.model_server import Reply, chat_response, tool_call

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


def _collecting(into: list[types.TaskStatusNotificationParams]) -> NotificationBinding[Any]:
    """The SDK client's way to receive ``notifications/tasks/status`` (it leaves the method out of
    its core tables): a notification binding with the SDK's params model."""
    async def on_status(params: types.TaskStatusNotificationParams) -> None:
        into.append(params)
    return NotificationBinding(method="notifications/tasks/status",
                               params_type=types.TaskStatusNotificationParams, handler=on_status)


async def _seen(statuses: list[types.TaskStatusNotificationParams], status: str, timeout: float = 20) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not any(s.status == status for s in statuses):
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"no {status} notification; got {[s.status for s in statuses]}")
        await asyncio.sleep(0.05)


def _follower_ended(served: McpDaemon, task_id: str) -> list[str]:
    """Why the daemon's status followers of ``task_id`` ended, from its log."""
    why = []
    for line in served.daemon.log_lines:
        with contextlib.suppress(ValueError):
            rec = json.loads(line)
            if isinstance(rec, dict) and rec.get("msg") == "mcp task status follower ended" \
                    and rec.get("task") == task_id:
                why.append(str(rec.get("why")))
    return why


async def _until_ended(served: McpDaemon, task_id: str) -> list[str]:
    for _ in range(200):
        if why := _follower_ended(served, task_id):
            return why
        await asyncio.sleep(0.05)
    raise AssertionError(f"the status follower of {task_id} did not end:\n{served.daemon.logs()}")


async def test_a_session_is_sent_each_status_change_of_the_task_it_created(
        served: McpDaemon, model: ScriptedModelServer) -> None:
    # the model takes its time: the client's GET stream, where the notifications go, is open by then
    model.push(Reply(body=chat_response(tool_calls=[tool_call("approve", {})], usage=(3, 2, 5)), delay=1.0),
               Reply(body=chat_response(content="action performed", usage=(2, 1, 3)), delay=0.5))
    statuses: list[types.TaskStatusNotificationParams] = []

    async def elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"approve": True})

    async with mcp_session(served.url, elicitation_callback=elicit,
                           notification_bindings=[_collecting(statuses)]) as session:
        task = await _create(session, "approver", "do the thing")
        assert task.status == "working"
        await _seen(statuses, "input_required")
        result = await _result(session, task.task_id)
        await _seen(statuses, "completed")
        got = await _get(session, task.task_id)
    assert result.structured_content["text"] == "action performed"
    assert [s.status for s in statuses] == ["input_required", "working", "completed"]
    assert {s.task_id for s in statuses} == {task.task_id}
    assert "approve?" in (statuses[0].status_message or "")
    last = statuses[-1]
    assert (last.created_at, last.ttl, last.poll_interval) == (got.created_at, None, got.poll_interval)
    at = datetime.fromisoformat
    assert at(last.created_at) <= at(statuses[0].last_updated_at) <= at(last.last_updated_at)
    assert all(s.meta is None for s in statuses)  # the task id is in the notification itself
    assert await _until_ended(served, task.task_id) == ["the task is completed"]


async def test_a_session_that_ends_leaves_no_status_follower(served: McpDaemon) -> None:
    statuses: list[types.TaskStatusNotificationParams] = []
    async with mcp_session(served.url, notification_bindings=[_collecting(statuses)]) as session:
        task = await _create(session, "approver", "do the thing")
        await _until(session, task.task_id, "input_required")
        assert _follower_ended(served, task.task_id) == []  # still following: the task is not over
    # the client left (its session ended) while the task waits for an answer: its follower is gone
    assert await _until_ended(served, task.task_id) == ["the session ended"]
    async with mcp_session(served.url) as session:
        assert (await _get(session, task.task_id)).status == "input_required"  # the task itself stays


async def test_a_cancelled_task_is_sent_as_cancelled(served: McpDaemon) -> None:
    statuses: list[types.TaskStatusNotificationParams] = []
    async with mcp_session(served.url, notification_bindings=[_collecting(statuses)]) as session:
        task = await _create(session, "approver", "do the thing")
        await _until(session, task.task_id, "input_required")
        cancel = types.CancelTaskRequest(params=types.CancelTaskRequestParams(task_id=task.task_id))
        await session.send_request(cancel, types.CancelTaskResult)
        await _seen(statuses, "cancelled")
    assert statuses[-1].status == "cancelled"
    assert await _until_ended(served, task.task_id) == ["the task is cancelled"]


async def test_a_daemon_stopping_under_a_followed_task_exits_cleanly(served: McpDaemon) -> None:
    statuses: list[types.TaskStatusNotificationParams] = []
    async with mcp_session(served.url, notification_bindings=[_collecting(statuses)]) as session:
        task = await _create(session, "approver", "do the thing")
        await _until(session, task.task_id, "input_required")
        code = await asyncio.to_thread(served.daemon.stop, 30.0)  # the session is still open
        assert code == 0, served.daemon.logs()
    assert _follower_ended(served, task.task_id) in (["the session ended"], ["the MCP listener closed"])
    served.daemon.start()  # the fixture stops it again
