"""The daemon's agents as MCP tools: listed, called, asked through elicitation, behind the token."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import mcp_types as types

from tests.mcp_server.conftest import TOKEN, McpDaemon, connect, mcp_session, post_status
from toolnexus_daemon.api._gen import runtime_pb2 as pb


async def test_the_exposed_agents_are_listed_as_tools(served: McpDaemon) -> None:
    async with mcp_session(served.url) as session:
        listed = await session.list_tools()
    tools = {t.name: t for t in listed.tools}
    assert set(tools) == {"writer", "approver"}
    assert tools["writer"].description == "writes a line"
    assert tools["writer"].input_schema["required"] == ["prompt"]


async def test_a_call_runs_the_agent_under_root_and_returns_its_text(served: McpDaemon) -> None:
    progress: list[tuple[float, str | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, message))

    async with mcp_session(served.url) as session:
        result = await session.call_tool("writer", {"prompt": "say ok"}, progress_callback=on_progress)
    assert not result.is_error
    assert [c.text for c in result.content if isinstance(c, types.TextContent)] == ["ok"]
    assert result.structured_content == {"status": "done", "text": "ok", "turns": 1, "total_tokens": 3}
    listed = served.stub.List(pb.ListRequest(runtime_id="demo"), timeout=5, metadata=served.grpc_metadata())
    assert [(h.id, h.parent) for h in listed.handles] == [("root/writer.1", "root")]
    assert progress and "model" in (progress[0][1] or "")


async def test_a_suspension_is_asked_through_elicitation_and_the_reply_resumes_it(served: McpDaemon) -> None:
    asked: list[types.ElicitRequestParams] = []
    metas: list[Any] = []

    async def elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        metas.append(ctx.meta)
        return types.ElicitResult(action="accept", content={"approve": True})

    async with mcp_session(served.url, elicitation_callback=elicit) as session:
        result = await session.call_tool("approver", {"prompt": "do the thing"})
    assert (result.is_error, result.structured_content["status"]) == (False, "done")
    assert result.structured_content["text"] == "action performed"
    assert len(asked) == 1 and asked[0].message == "approve?"
    assert isinstance(asked[0], types.ElicitRequestFormParams)
    assert "approve" in asked[0].requested_schema["properties"]
    assert metas == [None]  # a plain call has no task to relate the question to


async def test_a_declined_elicitation_resumes_with_a_decline(served: McpDaemon) -> None:
    async def elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="decline")

    async with mcp_session(served.url, elicitation_callback=elicit) as session:
        result = await session.call_tool("approver", {"prompt": "do the thing"})
    assert result.structured_content["status"] == "done"
    assert "declined" in result.structured_content["text"]


async def test_a_client_without_elicitation_gets_the_pending_request_and_how_to_answer(
        served: McpDaemon) -> None:
    async with mcp_session(served.url) as session:
        result = await session.call_tool("approver", {"prompt": "do the thing"})
    out = result.structured_content
    assert result.is_error and out["status"] == "pending"
    assert out["request_id"].startswith("approval-") and out["handle"] == "root/approver.1"
    text = result.content[0].text if isinstance(result.content[0], types.TextContent) else ""
    assert text.startswith("[pending] approve?") and out["request_id"] in text
    # still durable and answerable the gRPC way
    answer = pb.ResumeRequest(runtime_id="demo", answer=pb.Answer(id=out["request_id"], ok=True))
    resumed = served.stub.Resume(answer, timeout=15, metadata=served.grpc_metadata())
    assert resumed.result.status == "done"


async def test_an_unknown_tool_and_a_missing_prompt_are_invalid_params(served: McpDaemon) -> None:
    async with mcp_session(served.url) as session:
        for name, args in (("nobody", {"prompt": "x"}), ("writer", {})):
            try:
                await session.call_tool(name, args)
            except Exception as exc:  # the SDK raises the server's JSON-RPC error
                assert "unknown tool" in str(exc) or "prompt" in str(exc)
            else:
                raise AssertionError(f"{name} {args} was accepted")


async def test_the_endpoint_wants_the_token(served: McpDaemon) -> None:
    assert await post_status(served.url, {}) == 401
    assert await post_status(served.url, {"Authorization": "Bearer wrong"}) == 401
    async with mcp_session(served.url, token=TOKEN) as session:
        assert (await session.list_tools()).tools


async def test_a_client_that_leaves_mid_question_leaves_the_suspension_answerable(served: McpDaemon) -> None:
    asked = asyncio.Event()

    async def elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.set()
        await asyncio.sleep(3600)  # the person never answers here: the client goes away instead
        raise AssertionError("unreachable")

    async def call() -> None:
        async with mcp_session(served.url, elicitation_callback=elicit) as session:
            await session.call_tool("approver", {"prompt": "do the thing"})

    calling = asyncio.ensure_future(call())
    await asyncio.wait_for(asked.wait(), 15)
    calling.cancel()
    with contextlib.suppress(BaseException):
        await calling
    meta = served.grpc_metadata()
    pending = served.stub.ListPending(pb.ListPendingRequest(runtime_id="demo"), timeout=5, metadata=meta)
    assert [p.request.prompt for p in pending.items] == ["approve?"]
    answer = pb.Answer(id=pending.items[0].request.id, ok=True)
    resumed = served.stub.Resume(pb.ResumeRequest(runtime_id="demo", answer=answer), timeout=15,
                                 metadata=meta)
    assert (resumed.duplicate, resumed.result.status) == (False, "done")


async def test_a_daemon_stopping_under_an_open_question_exits_cleanly_and_keeps_it(served: McpDaemon) -> None:
    asked = asyncio.Event()

    async def elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.set()
        await asyncio.sleep(3600)
        raise AssertionError("unreachable")

    async def call() -> None:
        async with mcp_session(served.url, elicitation_callback=elicit) as session:
            await session.call_tool("approver", {"prompt": "do the thing"})

    calling = asyncio.ensure_future(call())
    await asyncio.wait_for(asked.wait(), 15)
    # exits by itself (stop() kills it after its timeout, and the code is then not 0): the grace for
    # in-flight calls, then the MCP sessions, whose writes to a client that does not read give up
    # after a few seconds each; generous for a loaded machine
    code = await asyncio.to_thread(served.daemon.stop, 30.0)
    assert code == 0, served.daemon.logs()
    calling.cancel()
    with contextlib.suppress(BaseException):
        await calling
    served.daemon.start()
    channel, stub = connect(served.daemon)
    with channel:
        pending = stub.ListPending(pb.ListPendingRequest(runtime_id="demo"), timeout=5,
                                   metadata=served.grpc_metadata())
    assert [p.request.prompt for p in pending.items] == ["approve?"]
