"""How a worker answers the daemon's calls (the core's ``aio._dispatch``, which both clients run),
without any server; plain functions as a blocking client's are."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import grpc
import grpc.aio
import pytest

from toolnexus_client import Answer, Context, Request, Tool, ToolResult
from toolnexus_client import _convert as convert
from toolnexus_client._dispatch import reply_parts, to_tool_result
from toolnexus_client._gen import runtime_pb2 as pb
from toolnexus_client.aio._dispatch import Dispatcher, run_llm, run_resolve, run_tool
from toolnexus_client.aio._worker import _Replies


def tool_call(tool: str, call_id: str = "c1", args: dict[str, Any] | None = None,
              answer: pb.Answer | None = None) -> pb.ToolCall:
    call = pb.ToolCall(call_id=call_id, handle="root/a.1", tool=tool, answer=answer)
    call.arguments.update(args or {})
    return call


def secret_action(args: dict[str, Any], ctx: Context) -> ToolResult | str:
    if ctx.answer is None:
        return ToolResult.suspend(id=f"auth:{ctx.handle}", kind="authorization", prompt="approve?")
    return "action performed"


TOOLS = {"secret_action": Tool("secret_action", execute=secret_action)}


async def test_a_suspending_tool_then_its_answer() -> None:
    """No answer → an outcome with the pending Request; with an answer → the output text."""
    first = await run_tool("rt", TOOLS, tool_call("secret_action"))
    assert first.HasField("pending") and not first.is_error
    assert (first.call_id, first.pending.id, first.pending.kind) == ("c1", "auth:root/a.1", "authorization")
    second = await run_tool("rt", TOOLS, tool_call("secret_action", "c2",
                                                   answer=pb.Answer(id="auth:root/a.1", ok=True)))
    assert (second.call_id, second.output, second.HasField("pending")) == ("c2", "action performed", False)


async def test_a_raising_tool_is_an_error_outcome() -> None:
    """An exception becomes is_error with "tool <name> raised <Type>: <msg>"."""
    def boom(args: dict[str, Any], ctx: Context) -> str:
        raise KeyError("missing")

    outcome = await run_tool("rt", {"boom": Tool("boom", execute=boom)}, tool_call("boom"))
    assert outcome.is_error and outcome.output == "tool boom raised KeyError: 'missing'"


async def test_an_unserved_tool_is_an_error_outcome() -> None:
    """A call for a tool this worker does not serve is answered, as an error naming it."""
    outcome = await run_tool("rt", TOOLS, tool_call("other"))
    assert outcome.is_error and "other" in outcome.output


@pytest.mark.parametrize(("value", "expected"), [
    ("text", ToolResult("text")),
    (None, ToolResult("")),
    ({"output": "x", "is_error": True}, ToolResult("x", True)),
    ({"pending": {"id": "r", "kind": "input", "prompt": "p"}},
     ToolResult(pending=Request("r", "input", "p"))),
    ({"temperature": 3}, ToolResult('{"temperature": 3}')),
    ([1, 2], ToolResult("[1, 2]")),
])
def test_return_values_coerce_to_tool_results(value: Any, expected: ToolResult) -> None:
    """str, None, ToolResult-shaped dicts and other JSON values each have one meaning."""
    assert to_tool_result(value) == expected


async def test_a_redelivered_call_id_runs_once() -> None:
    """The same call_id again — even while the first run is in flight — gets the first run's reply."""
    release, runs = threading.Event(), []

    def slow(args: dict[str, Any], ctx: Context) -> str:
        runs.append(ctx.call_id)
        release.wait(10)
        return f"ran {len(runs)}"

    dispatcher = Dispatcher("rt", {"slow": Tool("slow", execute=slow)})
    try:
        first = dispatcher.submit(pb.DaemonMessage(tool_call=tool_call("slow", "c7")))
        again = dispatcher.submit(pb.DaemonMessage(tool_call=tool_call("slow", "c7")))
        release.set()
        assert first is again and first is not None
        assert (await asyncio.wait_for(first, 10)).tool_outcome.output == "ran 1"
        later = dispatcher.submit(pb.DaemonMessage(tool_call=tool_call("slow", "c7")))
        assert later is not None and (await asyncio.wait_for(later, 10)).tool_outcome.output == "ran 1"
        assert runs == ["c7"]
    finally:
        dispatcher.close()


async def test_the_cache_is_bounded() -> None:
    """Past its size the oldest finished call_id is forgotten (and would run again)."""
    dispatcher = Dispatcher("rt", TOOLS, cache_size=2)
    try:
        for n in range(4):
            future = dispatcher.submit(pb.DaemonMessage(tool_call=tool_call("secret_action", f"c{n}")))
            assert future is not None
            await asyncio.wait_for(future, 10)
        assert list(dispatcher._cache) == ["c2", "c3"]
    finally:
        dispatcher.close()


async def test_welcome_is_not_a_call() -> None:
    """Only call kinds are scheduled."""
    dispatcher = Dispatcher("rt", TOOLS)
    try:
        assert dispatcher.submit(pb.DaemonMessage(welcome=pb.Welcome(worker_id="w"))) is None
    finally:
        dispatcher.close()


def llm_call(body: dict[str, Any]) -> pb.LlmCall:
    return pb.LlmCall(call_id="m1", handle="root", body=convert.struct_from(body))


async def test_llm_call_goes_through_the_transport() -> None:
    """The transport sees {"body": request} and its {"status", "headers", "body"} becomes the reply."""
    seen: list[dict[str, Any]] = []

    def transport(request: dict[str, Any]) -> dict[str, Any]:
        seen.append(request)
        return {"status": 200, "headers": {}, "body": {"choices": [{"message": {"content": "hi"}}]}}

    reply = await run_llm(transport, llm_call({"model": "m", "max_tokens": 64, "messages": []}))
    assert seen == [{"body": {"model": "m", "max_tokens": 64, "messages": []}}]
    assert reply.call_id == "m1" and reply.status == 200 and not reply.error
    assert convert.dict_from(reply.body)["choices"][0]["message"]["content"] == "hi"


async def test_llm_reply_shapes() -> None:
    """A JSON-text body is parsed, a text error body is wrapped, a bare completion is a 200."""
    text = await run_llm(lambda r: {"status": 201, "body": '{"id": "x"}'}, llm_call({}))
    assert (text.status, convert.dict_from(text.body)) == (201, {"id": "x"})
    failed = await run_llm(lambda r: {"status": 503, "body": "busy"}, llm_call({}))
    assert (failed.status, convert.dict_from(failed.body)) == (503, {"error": {"message": "busy"}})
    bare = await run_llm(lambda r: {"choices": []}, llm_call({}))
    assert (bare.status, convert.dict_from(bare.body)) == (200, {"choices": []})


async def test_a_failing_transport_is_an_error_reply() -> None:
    """An exception in the transport (or no transport) sets LlmReply.error."""
    def broken(request: dict[str, Any]) -> dict[str, Any]:
        raise ConnectionError("refused")

    assert (await run_llm(broken, llm_call({}))).error == "transport raised ConnectionError: refused"
    assert (await run_llm(None, llm_call({}))).error


async def test_resolve_asks_the_resolver() -> None:
    """The resolver's answer (dict or Answer) is sent back; a failure declines as cancelled."""
    call = pb.Resolve(call_id="r1", handle="root", request=pb.Request(id="q", kind="approval", prompt="p"))
    reply = await run_resolve(lambda req: {"id": req.id, "ok": True, "data": {"by": "bot"}}, call)
    assert convert.answer_from_pb(reply.answer) == Answer("q", True, data={"by": "bot"})
    declined = await run_resolve(None, call)
    assert convert.answer_from_pb(declined.answer) == Answer("q", False, reason="cancelled")


@pytest.mark.parametrize("reply", [
    {"status": 200, "body": {"choices": [{"message": {"content": "hi", "tool_calls": []}}], "usage": {}}},
    {"status": 200, "body": {}},
    {"choices": []},
    {"status": 503, "body": "busy"},
    {"status": 200, "body": {"bad": {1, 2}}},  # no JSON: the error reply, no half-built body
    {"status": 2**40, "body": {"x": 1}},  # out of an int32: the error reply
    {"status": 200, "body": {"bad": object(), "n": 1}},
])
async def test_a_model_reply_built_in_place_is_the_reply_built_whole(reply: dict[str, Any]) -> None:
    """The dispatcher writes a model reply straight into its WorkerMessage; what it sends is what
    ``run_llm``'s reply wrapped in a WorkerMessage was, errors included."""
    def transport(request: dict[str, Any]) -> dict[str, Any]:
        return reply

    call = llm_call({"messages": [{"role": "user", "content": "x"}], "max_tokens": 5})
    dispatcher = Dispatcher("rt", {}, transport)
    try:
        task = dispatcher.submit(pb.DaemonMessage(llm_call=call))
        assert task is not None
        got = await asyncio.wait_for(task, 10)
    finally:
        dispatcher.close()
    try:  # the reply as run_llm built it before: whole, in one constructor
        status, parsed = reply_parts(reply)
        want = pb.LlmReply(call_id="m1", status=status, body=convert.struct_from(parsed))
    except Exception as exc:
        want = pb.LlmReply(call_id="m1", error=f"transport raised {type(exc).__name__}: {exc}")
    assert got == pb.WorkerMessage(llm_reply=want)
    assert got.SerializeToString(deterministic=True) == pb.WorkerMessage(llm_reply=want).SerializeToString(
        deterministic=True)


# ------------------------------------------------------------ a connection's replies (aio._worker._Replies)

class _FakeCall:
    """The writing side of a grpc.aio stream call: records writes, fails as told, one write at a time."""

    def __init__(self, fail: BaseException | None = None) -> None:
        self.written: list[pb.WorkerMessage] = []
        self.fail = fail
        self.in_flight = 0
        self.most_in_flight = 0
        self.gate = asyncio.Event()
        self.gate.set()

    async def write(self, message: pb.WorkerMessage) -> None:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await self.gate.wait()
            if self.fail is not None:
                raise self.fail
            self.written.append(message)
        finally:
            self.in_flight -= 1


def _reply(call_id: str) -> pb.WorkerMessage:
    return pb.WorkerMessage(tool_outcome=pb.ToolOutcome(call_id=call_id))


async def test_replies_go_out_one_write_at_a_time_in_order() -> None:
    """gRPC allows one write in flight: replies ready together are written one after the other."""
    call = _FakeCall()
    replies = _Replies(call)
    call.gate.clear()
    sends = [asyncio.create_task(replies.send(_reply(f"c{n}"))) for n in range(3)]
    await asyncio.sleep(0)
    call.gate.set()
    await asyncio.gather(*sends)
    assert [m.tool_outcome.call_id for m in call.written] == ["c0", "c1", "c2"]
    assert call.most_in_flight == 1


@pytest.mark.parametrize("fail", [
    asyncio.CancelledError(),  # the call cancelled under the write (a reconnect), not the task
    asyncio.InvalidStateError("RPC already finished"),
    grpc.aio.AioRpcError(grpc.StatusCode.UNAVAILABLE, grpc.aio.Metadata(), grpc.aio.Metadata(), "gone"),
])
async def test_a_reply_on_a_gone_stream_is_dropped_quietly(fail: BaseException) -> None:
    """A stream that ended or was cancelled drops its replies (the daemon redelivers the calls on
    the next stream): the call's task does not fail, nor end cancelled, and nothing more is written."""
    call = _FakeCall(fail)
    replies = _Replies(call)
    await replies.send(_reply("c1"))
    call.fail = None
    await replies.send(_reply("c2"))
    assert call.written == []


async def test_a_cancelled_call_task_is_cancelled_while_writing() -> None:
    """The task's own cancellation (the worker stopping) is not swallowed as a gone stream."""
    call = _FakeCall()
    call.gate.clear()
    sending = asyncio.create_task(_Replies(call).send(_reply("c1")))
    await asyncio.sleep(0)
    sending.cancel()
    with pytest.raises(asyncio.CancelledError):
        await sending


async def test_a_call_that_fails_unexpectedly_is_logged_once_and_sends_nothing(
        caplog: pytest.LogCaptureFixture) -> None:
    """A call whose reply cannot even be built (a Resolve whose request data holds NaN) is logged as
    an unexpected failure, and its connection gets no reply, as before."""
    call = _FakeCall()
    replies = _Replies(call)
    resolve = pb.Resolve(call_id="r9", handle="root", request=pb.Request(id="q", kind="approval"))
    resolve.request.data.fields["x"].number_value = float("nan")
    dispatcher = Dispatcher("rt", {}, resolver=lambda req: {"id": req.id, "ok": True})
    try:
        task = dispatcher.submit(pb.DaemonMessage(resolve=resolve), None, replies.send)
        assert task is not None
        with pytest.raises(ValueError, match="NaN"):
            await asyncio.wait_for(task, 10)
    finally:
        dispatcher.close()
    failures = [r for r in caplog.records if "worker call failed unexpectedly" in r.getMessage()]
    assert len(failures) == 1 and call.written == []
