"""A pending watcher that falls behind starts over with the full list instead of failing.

The daemon ends a ``WatchPending`` whose reader fell 10,000 changes or 8 MB behind with
RESOURCE_EXHAUSTED and the ``x-toolnexus-relist`` trailer; the Python clients open it again and
the full list arrives again, then ``SYNCED``. The per-caller stream limit's RESOURCE_EXHAUSTED has
no trailer and stays an error. Real daemon, real worker tools that suspend with large requests.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from tests.support.daemon import DaemonProcess
from toolnexus_client import Context, Daemon, PendingChange, Runtime, Tool, ToolResult, agent, aio, registry
from toolnexus_client.errors import ResourceExhausted
from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_daemon.api._gen import runtime_pb2_grpc as pb_grpc
from toolnexus_devtools import ScriptedModelServer

# each open suspension carries ~310 KB (the default bounds: 64 KB of prompt, 256 KB of data), so
# this many are well past the 8 MB a watcher may fall behind plus what the transport buffers
SUSPENSIONS = 70
RELIST = "x-toolnexus-relist"


def ask(args: dict[str, Any], ctx: Context) -> ToolResult:
    return ToolResult.suspend(kind="input", prompt="p" * 60_000, data={"blob": "y" * 250_000})


REGISTRY = registry(agent("asker", "asks", uses={"tools": [Tool("ask", execute=ask)]}))


@pytest.fixture
def model() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as srv:  # the default script calls the first tool once
        yield srv


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[DaemonProcess]:
    proc = DaemonProcess(tmp_path / "data", "--max-watch-streams-per-caller", "3").start()
    yield proc
    proc.stop()


def _suspend(rt: Runtime, count: int) -> set[str]:
    """``count`` new handles, each suspended on its own large request; their request ids."""
    ids = set()
    for _ in range(count):
        handle = rt.spawn(rt.root, "asker")
        rt.wake(handle, "go")
        pending = rt.wait(handle, timeout=30).pending
        assert pending is not None
        ids.add(pending.id)
    return ids


def _after_reopen(changes: Iterator[PendingChange], stream: Any) -> set[str]:
    """The ids listed between the first reopening and the SYNCED that follows it."""
    listed: set[str] = set()
    for change in changes:
        if stream.reopened == 0:
            continue
        if change.type == "SYNCED":
            return listed
        assert change.type == "ADDED" and change.item is not None, change
        listed.add(change.item.request.id)
    raise AssertionError("the stream ended before it was listed again")


def test_the_daemon_ends_a_pending_watch_that_fell_behind_with_the_relist_trailer(
        daemon: DaemonProcess, model: ScriptedModelServer) -> None:
    llm = {"style": "openai", "base_url": model.url, "model": "scripted"}
    with Runtime.new(daemon.target, REGISTRY, llm=llm) as rt, grpc.insecure_channel(daemon.target) as channel:
        stream = pb_grpc.AgentRuntimeStub(channel).WatchPending(pb.WatchPendingRequest(runtime_id=rt.id),
                                                                timeout=120)
        assert next(stream).type == "SYNCED"
        _suspend(rt, SUSPENSIONS)  # not read meanwhile
        with pytest.raises(grpc.RpcError) as ended:
            for _ in stream:
                pass
    err = ended.value
    assert err.code() is grpc.StatusCode.RESOURCE_EXHAUSTED, err.details()
    assert "starts over with the full list" in (err.details() or "")
    assert (RELIST, "1") in [(str(k), str(v)) for k, v in err.trailing_metadata() or ()]


def test_the_blocking_client_lists_again_after_falling_behind(daemon: DaemonProcess,
                                                              model: ScriptedModelServer) -> None:
    llm = {"style": "openai", "base_url": model.url, "model": "scripted"}
    with Runtime.new(daemon.target, REGISTRY, llm=llm) as rt, Daemon(daemon.target) as d:
        stream = d.watch_pending(runtime_id=rt.id)
        assert next(stream).type == "SYNCED"
        ids = _suspend(rt, SUSPENSIONS)
        listed = _after_reopen(stream, stream)
        stream.cancel()
    assert stream.reopened == 1
    assert listed == ids


def test_the_asyncio_client_lists_again_after_falling_behind(daemon: DaemonProcess,
                                                             model: ScriptedModelServer) -> None:
    llm = {"style": "openai", "base_url": model.url, "model": "scripted"}

    async def scenario(rt: Runtime) -> tuple[set[str], set[str], int]:
        async with aio.Daemon(daemon.target) as d:
            stream = d.watch_pending(runtime_id=rt.id)
            assert (await anext(stream)).type == "SYNCED"
            ids = await asyncio.to_thread(_suspend, rt, SUSPENSIONS)
            listed: set[str] = set()
            async for change in stream:
                if stream.reopened == 0:
                    continue
                if change.type == "SYNCED":
                    break
                assert change.item is not None
                listed.add(change.item.request.id)
            stream.cancel()
            return ids, listed, stream.reopened

    with Runtime.new(daemon.target, REGISTRY, llm=llm) as rt:
        ids, listed, reopened = asyncio.run(scenario(rt))
    assert reopened == 1 and listed == ids


def test_the_stream_limit_stays_an_error(daemon: DaemonProcess) -> None:
    """Past ``--max-watch-streams-per-caller`` the refusal carries no trailer: reopening would not
    help, so the client raises it."""
    with Daemon(daemon.target) as d:
        held = [d.watch_pending() for _ in range(3)]
        for stream in held:
            assert next(stream).type == "SYNCED"
        extra = d.watch_pending()
        with pytest.raises(ResourceExhausted, match="max-watch-streams-per-caller"):
            next(extra)
        assert extra.reopened == 0
        for stream in held:
            stream.cancel()
