"""Runtime.new and the worker stream against a fake AgentRuntime server (no daemon)."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from typing import Any

import grpc
import pytest

from toolnexus_client import (
    Context,
    InvalidArgument,
    NotFound,
    Runtime,
    Tool,
    Unavailable,
    agent,
    registry,
)
from toolnexus_client._gen import runtime_pb2 as pb

from .conftest import DROP, FakeDaemon

Fake = tuple[FakeDaemon, str]


def make_registry(runs: list[str]) -> Any:
    def count(args: dict[str, Any], ctx: Context) -> str:
        runs.append(ctx.call_id)
        return f"{ctx.tool} {args.get('n')} on {ctx.handle}"

    return registry(agent("a", uses={"tools": [Tool("count", execute=count), Tool("remote")]}))


def mock_transport(request: dict[str, Any]) -> dict[str, Any]:
    return {"status": 200, "headers": {}, "body": {"echo": request["body"]}}


def call(call_id: str, n: int = 1) -> pb.DaemonMessage:
    message = pb.DaemonMessage(tool_call=pb.ToolCall(call_id=call_id, handle="root/a.1", tool="count"))
    message.tool_call.arguments.update({"n": n})
    return message


def test_new_returns_once_welcomed_with_an_explicit_hello(fake: Fake) -> None:
    """The hello names the runtime and exactly the tools with a callable; new() waited for Welcome."""
    daemon, target = fake
    with Runtime.new(target=target, registry=make_registry([]), transport=mock_transport) as rt:
        assert rt.worker is not None and rt.worker.welcomes == 1
        hello = daemon.hellos.get(timeout=5)
        assert (rt.id, rt.root, rt.reattached) == ("rt-1", "root", False)
        assert (hello.runtime_id, list(hello.tools), hello.llm, hello.resolver) == ("rt-1", ["count"], True,
                                                                                    False)
        assert hello.worker_id == rt.worker.hello.worker_id and hello.worker_id.startswith("py-")


def test_tool_and_model_calls_are_answered(fake: Fake) -> None:
    """A ToolCall gets a ToolOutcome, an LlmCall an LlmReply, on the same stream."""
    daemon, target = fake
    with Runtime.new(target=target, registry=make_registry([]), transport=mock_transport):
        daemon.calls.put(call("c1", 7))
        outcome = daemon.replies.get(timeout=5)
        assert outcome.tool_outcome.call_id == "c1" and outcome.tool_outcome.output == "count 7 on root/a.1"
        llm = pb.DaemonMessage(llm_call=pb.LlmCall(call_id="m1", handle="root"))
        llm.llm_call.body.update({"messages": []})
        daemon.calls.put(llm)
        reply = daemon.replies.get(timeout=5).llm_reply
        assert reply.call_id == "m1" and reply.status == 200 and "echo" in reply.body


def test_a_broken_stream_reconnects_and_redelivery_is_not_rerun(fake: Fake) -> None:
    """After the daemon drops the stream the worker says hello again; a redelivered call_id is not re-run."""
    daemon, target = fake
    runs: list[str] = []
    with Runtime.new(target=target, registry=make_registry(runs), transport=mock_transport) as rt:
        first_hello = daemon.hellos.get(timeout=5)
        daemon.calls.put(call("c1"))
        assert daemon.replies.get(timeout=5).tool_outcome.call_id == "c1"
        daemon.calls.put(DROP)
        second_hello = daemon.hellos.get(timeout=10)
        assert rt.worker is not None
        rt.worker.wait_welcomed(2, timeout=10)
        assert second_hello.worker_id == first_hello.worker_id
        daemon.calls.put(call("c1"))
        again = daemon.replies.get(timeout=5).tool_outcome
        assert (again.call_id, again.output) == ("c1", "count 1 on root/a.1")
        assert runs == ["c1"]


def test_reattach_sends_the_runtime_id(fake: Fake) -> None:
    """Runtime.new(runtime_id=...) asks New for that id and serves it."""
    daemon, target = fake
    with Runtime.new(target=target, registry=make_registry([]), llm={"style": "worker"}, runtime_id="old",
                     transport=mock_transport) as rt:
        assert (rt.id, rt.reattached) == ("old", True)
        assert daemon.hellos.get(timeout=5).runtime_id == "old"


def test_auth_metadata_reaches_every_call(fake: Fake) -> None:
    """token= and runtime_key= travel as authorization and x-toolnexus-runtime-key on New and Connect."""
    daemon, target = fake
    with Runtime.new(target=target, registry=make_registry([]), transport=mock_transport, token="tok",
                     runtime_key="rk"):
        daemon.hellos.get(timeout=5)
    for name, metadata in daemon.metadata:
        assert metadata.get("authorization") == "Bearer tok", name
        assert metadata.get("x-toolnexus-runtime-key") == "rk", name
    assert {name for name, _ in daemon.metadata} >= {"New", "Connect"}


def test_errors_of_new_and_connect_are_typed(fake: Fake) -> None:
    """A refused New or Connect surfaces as the matching ToolnexusError with the daemon's message."""
    daemon, target = fake
    daemon.new_error = (grpc.StatusCode.INVALID_ARGUMENT, 'agent "a": tool "x" declared twice')
    with pytest.raises(InvalidArgument) as bad:
        Runtime.new(target=target, registry=make_registry([]), transport=mock_transport)
    assert bad.value.message == 'agent "a": tool "x" declared twice'
    daemon.new_error = None
    daemon.connect_error = (grpc.StatusCode.NOT_FOUND, 'unknown runtime "rt-1"')
    with pytest.raises(NotFound, match='unknown runtime "rt-1"'):
        Runtime.new(target=target, registry=make_registry([]), transport=mock_transport)


def test_no_welcome_is_unavailable(fake: Fake) -> None:
    """A daemon that never welcomes the worker makes new() fail after connect_timeout."""
    daemon, target = fake
    daemon.welcome = False
    with pytest.raises(Unavailable, match="no Welcome"):
        Runtime.new(target=target, registry=make_registry([]), transport=mock_transport, connect_timeout=0.5)


def test_nothing_to_serve_opens_no_stream(fake: Fake) -> None:
    """Without callables, transport or resolver there is no worker stream."""
    daemon, target = fake
    with Runtime.new(target=target, registry=registry(agent("a")), llm={"style": "openai"}) as rt:
        assert rt.worker is None
    assert [name for name, _ in daemon.metadata] == ["New"]


def test_watch_converts_and_cancels(fake: Fake) -> None:
    """watch(after_seq) yields converted events after that seq and stops when cancelled."""
    daemon, target = fake
    daemon.events = [pb.Event(seq=n, runtime_id="rt-1", handle="root", type="transition") for n in (1, 2, 3)]
    with Runtime.new(target=target, registry=registry(agent("a")), llm={"style": "openai"}) as rt:
        stream = rt.watch(after_seq=1)
        seqs = [next(stream).seq, next(stream).seq]
        stream.cancel()
        assert seqs == [2, 3]
        assert list(stream) == []


def test_llm_or_transport_is_required() -> None:
    """Runtime.new refuses to guess a model, and a transport needs style worker."""
    with pytest.raises(ValueError, match="llm= .* or transport="):
        Runtime.new(target="127.0.0.1:1", registry=registry(agent("a")))
    with pytest.raises(ValueError, match="style 'worker'"):
        Runtime.new(target="127.0.0.1:1", registry=registry(agent("a")), llm={"style": "openai"},
                    transport=mock_transport)


@pytest.mark.parametrize("breaks", ["daemon drops the stream", "worker reconnects"])
def test_a_call_running_when_its_stream_breaks_is_answered_once_on_the_next(fake: Fake, breaks: str) -> None:
    """A call task writes its reply on the stream the call came on; when that stream is gone by the
    time the reply is ready (the daemon ended it, or the worker cancelled it to reconnect), the
    reply is dropped there and goes out on the next stream, where the daemon redelivered the call:
    once, and the tool ran once."""
    daemon, target = fake
    runs: list[str] = []
    release = threading.Event()

    def slow(args: dict[str, Any], ctx: Context) -> str:
        runs.append(ctx.call_id)
        release.wait(10)
        return f"slow done on {ctx.handle}"

    reg = registry(agent("a", uses={"tools": [Tool("slow", execute=slow)]}))
    with Runtime.new(target=target, registry=reg, transport=mock_transport) as rt:
        assert rt.worker is not None
        daemon.hellos.get(timeout=5)
        message = pb.DaemonMessage(tool_call=pb.ToolCall(call_id="c9", handle="root/a.1", tool="slow"))
        daemon.calls.put(message)
        _wait_until(lambda: runs == ["c9"])
        if breaks == "worker reconnects":
            rt.worker.reconnect()
        else:
            daemon.calls.put(DROP)
        daemon.hellos.get(timeout=10)
        rt.worker.wait_welcomed(2, timeout=10)
        _wait_until(lambda: daemon.open_streams == 1)  # the first stream's handler saw it end
        daemon.calls.put(message)  # the redelivery, while the first run still runs
        release.set()
        reply = daemon.replies.get(timeout=5).tool_outcome
        assert (reply.call_id, reply.output) == ("c9", "slow done on root/a.1")
        with pytest.raises(queue.Empty):
            daemon.replies.get(timeout=0.5)
        assert runs == ["c9"]


def _wait_until(check: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)
