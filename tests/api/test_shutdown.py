"""Graceful SIGTERM: blocked calls end with UNAVAILABLE, streams close, exit 0, and a running turn resumes."""

from __future__ import annotations

import grpc

from tests.support.daemon import DaemonProcess
from tests.support.grpc_client import Worker, native_agent, open_stub, openai_llm, wait_until
from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_devtools import Reply, ScriptedModelServer
from toolnexus_devtools.model_server import chat_response


def test_sigterm_releases_blocked_calls_and_the_turn_continues_after_restart(
        own_daemon: DaemonProcess, model: ScriptedModelServer) -> None:
    """A Wait on a turn stuck in a model call gets UNAVAILABLE; after restart the call is re-issued."""
    model.push(Reply(200, chat_response("too late"), delay=3.0), chat_response("after restart"))
    channel, stub = open_stub(own_daemon.start().target)
    with channel:
        llm = openai_llm(model.url, timeout_ms=10_000)
        new = pb.NewRequest(agents=[native_agent("slow", "unused")], llm=llm)
        rid = stub.New(new, timeout=5).runtime_id
        handle = stub.Spawn(pb.SpawnRequest(runtime_id=rid, agent="slow"), timeout=5).handle
        stub.Wake(pb.WakeRequest(runtime_id=rid, handle=handle, prompt="go"), timeout=5)
        wait = stub.Wait.future(pb.WaitRequest(runtime_id=rid, handle=handle), timeout=20)
        watch = stub.Watch(pb.WatchRequest(runtime_id=rid), timeout=20)
        worker = Worker(stub, rid, tool=lambda c: pb.ToolOutcome(call_id=c.call_id))
        wait_until(lambda: model.calls == 1)

        assert own_daemon.stop() == 0
        assert wait.exception() is not None and wait.exception().code() is grpc.StatusCode.UNAVAILABLE
        _drain(watch)
        worker.close()
    assert '"msg": "stopped"' in own_daemon.logs()

    channel, stub = open_stub(own_daemon.start().target)
    with channel:
        result = stub.Wait(pb.WaitRequest(runtime_id=rid, handle=handle, timeout_ms=10_000), timeout=15)
    assert (result.status, result.text) == ("done", "after restart")
    assert model.calls == 2


def _drain(stream: grpc.Future) -> None:
    """Read a stream to its end; a stream the daemon closed on shutdown ends OK or UNAVAILABLE."""
    try:
        for _ in stream:
            pass
    except grpc.RpcError as err:
        assert err.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED), err
