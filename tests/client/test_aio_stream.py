"""The asyncio worker stream against the fake AgentRuntime server: hello, reconnect, dedup, refusals.

The fake's queues block, so the test reads them in ``asyncio.to_thread`` while
the loop keeps serving the worker stream.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import grpc
import pytest

from toolnexus_client import Context, InvalidArgument, NotFound, Tool, Unavailable, agent, registry
from toolnexus_client._gen import runtime_pb2 as pb
from toolnexus_client.aio import Runtime

from .conftest import DROP, FakeDaemon

Fake = tuple[FakeDaemon, str]


def make_registry(runs: list[tuple[str, int]]) -> Any:
    async def count(args: dict[str, Any], ctx: Context) -> str:
        runs.append((ctx.call_id, threading.get_ident()))
        await asyncio.sleep(0)
        return f"{ctx.tool} {args.get('n')} on {ctx.handle}"

    return registry(agent("a", uses={"tools": [Tool("count", execute=count), Tool("remote")]}))


async def echo(request: dict[str, Any]) -> dict[str, Any]:
    return {"status": 200, "headers": {}, "body": {"echo": request["body"]}}


def call(call_id: str, n: int = 1) -> pb.DaemonMessage:
    message = pb.DaemonMessage(tool_call=pb.ToolCall(call_id=call_id, handle="root/a.1", tool="count"))
    message.tool_call.arguments.update({"n": n})
    return message


async def take(q: Any) -> Any:
    return await asyncio.to_thread(q.get, timeout=10)


async def test_hello_then_tool_and_model_calls_on_the_loop(fake: Fake) -> None:
    """The hello names exactly the tools with a callable; tool and model calls are answered by coroutines."""
    daemon, target = fake
    runs: list[tuple[str, int]] = []
    async with await Runtime.new(target, make_registry(runs), transport=echo, token="tok") as rt:
        hello = await take(daemon.hellos)
        assert rt.worker is not None and hello.worker_id == rt.worker.hello.worker_id
        assert (hello.runtime_id, list(hello.tools), hello.llm, hello.resolver) == ("rt-1", ["count"], True,
                                                                                    False)
        daemon.calls.put(call("c1", 7))
        outcome = (await take(daemon.replies)).tool_outcome
        assert (outcome.call_id, outcome.output) == ("c1", "count 7 on root/a.1")
        llm = pb.DaemonMessage(llm_call=pb.LlmCall(call_id="m1", handle="root"))
        llm.llm_call.body.update({"messages": []})
        daemon.calls.put(llm)
        reply = (await take(daemon.replies)).llm_reply
        assert (reply.call_id, reply.status, "echo" in reply.body) == ("m1", 200, True)
    assert runs == [("c1", threading.get_ident())]
    assert all(md.get("authorization") == "Bearer tok" for _, md in daemon.metadata)


async def test_a_broken_stream_reconnects_and_a_redelivery_is_not_rerun(fake: Fake) -> None:
    """After the daemon drops the stream the worker says hello again; a redelivered call_id is not re-run."""
    daemon, target = fake
    runs: list[tuple[str, int]] = []
    async with await Runtime.new(target, make_registry(runs), transport=echo) as rt:
        first_hello = await take(daemon.hellos)
        daemon.calls.put(call("c1"))
        assert (await take(daemon.replies)).tool_outcome.call_id == "c1"
        daemon.calls.put(DROP)
        assert (await take(daemon.hellos)).worker_id == first_hello.worker_id
        assert rt.worker is not None
        await rt.worker.wait_welcomed(2, timeout=10)
        daemon.calls.put(call("c1"))
        again = (await take(daemon.replies)).tool_outcome
        assert (again.call_id, again.output) == ("c1", "count 1 on root/a.1")
    assert [call_id for call_id, _ in runs] == ["c1"]


async def test_refusals_are_typed_and_no_welcome_is_unavailable(fake: Fake) -> None:
    """A refused New or Connect raises the matching error; a silent daemon is Unavailable in time."""
    daemon, target = fake
    daemon.new_error = (grpc.StatusCode.INVALID_ARGUMENT, 'agent "a": tool "x" declared twice')
    with pytest.raises(InvalidArgument, match="declared twice"):
        await Runtime.new(target, make_registry([]), transport=echo)
    daemon.new_error = None
    daemon.connect_error = (grpc.StatusCode.NOT_FOUND, 'unknown runtime "rt-1"')
    with pytest.raises(NotFound, match='unknown runtime "rt-1"'):
        await Runtime.new(target, make_registry([]), transport=echo)
    daemon.connect_error = None
    daemon.welcome = False
    with pytest.raises(Unavailable, match="no Welcome"):
        await Runtime.new(target, make_registry([]), transport=echo, connect_timeout=0.5)


async def test_nothing_to_serve_opens_no_stream(fake: Fake) -> None:
    daemon, target = fake
    async with await Runtime.new(target, registry(agent("a")), llm={"style": "openai"}) as rt:
        assert rt.worker is None
    assert [name for name, _ in daemon.metadata] == ["New"]
