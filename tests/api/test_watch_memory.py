"""Watch streams cost the daemon bounded memory: by bytes per stream, by a count of streams per caller.

A stream whose client does not read holds at most about one event in flight (not a page of decoded
events); one that falls behind the live events is ended RESOURCE_EXHAUSTED naming the seq to resume
after; the streams past a caller's limit are refused, naming the limit and its flag.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from tests.support.daemon import DaemonProcess
from tests.support.grpc_client import code_of, open_stub, openai_llm
from toolnexus_client import Runtime, agent, aio, registry
from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_daemon.api._gen import runtime_pb2_grpc as pb_grpc
from toolnexus_devtools import ScriptedModelServer, chat_response

STREAMS = 40
RESULTS = 16
RESULT_BYTES = 400_000
RESUME_AFTER = "x-toolnexus-resume-after-seq"
BIG = [("grpc.max_receive_message_length", 16 << 20)]


def _anon_rss(pid: int) -> int:
    """Anonymous resident bytes (LMDB's mapped pages are file-backed and left out)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no RssAnon in /proc/<pid>/status")


def _settled(pid: int) -> int:
    """The RSS once it stopped growing for a second (at most 30 s: a slow machine can only make
    the growth measured smaller, never make a bounded daemon look unbounded)."""
    deadline, peak, since = time.monotonic() + 30, _anon_rss(pid), time.monotonic()
    while time.monotonic() < deadline and time.monotonic() - since < 1.0:
        time.sleep(0.1)
        now = _anon_rss(pid)
        if now > peak + (256 << 10):
            peak, since = now, time.monotonic()
    return _anon_rss(pid)


def _writer_runtime(stub: pb_grpc.AgentRuntimeStub, model: ScriptedModelServer, results: int,
                    size: int) -> str:
    rid = stub.New(pb.NewRequest(agents=[pb.AgentDef(name="writer", does="writes")],
                                 llm=openai_llm(model.url)), timeout=10).runtime_id
    settle(stub, model, rid, results, size)
    return rid


def settle(stub: pb_grpc.AgentRuntimeStub, model: ScriptedModelServer, rid: str, results: int,
           size: int) -> None:
    """``results`` turns of new handles, each settling ``done`` with ``size`` bytes of text."""
    text = "x" * size
    model.script = lambda body: chat_response(content=text)
    for _ in range(results):
        handle = stub.Spawn(pb.SpawnRequest(runtime_id=rid, agent="writer"), timeout=10).handle
        stub.Wake(pb.WakeRequest(runtime_id=rid, handle=handle, prompt="go"), timeout=10)
        result = stub.Wait(pb.WaitRequest(runtime_id=rid, handle=handle, timeout_ms=30_000), timeout=40)
        assert result.status == "done", result


@pytest.fixture
def big_daemon(tmp_path: Path) -> Iterator[DaemonProcess]:
    proc = DaemonProcess(tmp_path / "data", "--max-watch-streams-per-caller", str(STREAMS + 5))
    proc.start()
    yield proc
    proc.stop()


def test_streams_that_do_not_read_hold_about_one_event_each(big_daemon: DaemonProcess,
                                                            model: ScriptedModelServer) -> None:
    """40 streams replaying 16 results of 400 kB, none read past its first event: the daemon grows by
    at most about one event in flight per stream (a stream used to hold its whole replay page, 6.4 MB
    here), and gives the memory back when they are cancelled."""
    channel, stub = open_stub(big_daemon.target)
    assert big_daemon.proc is not None
    pid = big_daemon.proc.pid
    with channel:
        rid = _writer_runtime(stub, model, RESULTS, RESULT_BYTES)
        base = _settled(pid)
        channels = [grpc.insecure_channel(big_daemon.target, options=BIG) for _ in range(4)]
        stubs = [pb_grpc.AgentRuntimeStub(ch) for ch in channels]
        streams = [stubs[n % 4].Watch(pb.WatchRequest(runtime_id=rid), timeout=120) for n in range(STREAMS)]
        try:
            for stream in streams:
                assert next(stream).seq == 1  # the daemon is writing to every one of them
            per_stream = (_settled(pid) - base) / STREAMS
        finally:
            for stream in streams:
                stream.cancel()
            for ch in channels:
                ch.close()
        kept = _settled(pid) - base
    # one event in flight is held twice at most (its encoded message and gRPC's copy), plus a page
    bound = 2 * RESULT_BYTES + (256 << 10)
    assert per_stream < bound, f"{per_stream / 1e6:.2f} MB per stream, bound {bound / 1e6:.2f} MB"
    assert kept < STREAMS * bound / 4, f"{kept / 1e6:.1f} MB kept after every stream was cancelled"


def test_a_caller_past_its_stream_limit_is_refused_naming_the_flag(tmp_path: Path,
                                                                   model: ScriptedModelServer) -> None:
    with DaemonProcess(tmp_path / "data", "--max-watch-streams-per-caller", "3") as proc:
        channel, stub = open_stub(proc.target)
        with channel:
            rid = _writer_runtime(stub, model, 1, 10)
            held = [stub.Watch(pb.WatchRequest(runtime_id=rid), timeout=30) for _ in range(2)]
            held.append(stub.WatchPending(pb.WatchPendingRequest(), timeout=30))
            try:
                for stream in held:
                    next(stream)  # open: each holds its place
                other = grpc.insecure_channel(proc.target)  # another connection of the same caller
                with other:
                    code, details = code_of(lambda: next(pb_grpc.AgentRuntimeStub(other).Watch(
                        pb.WatchRequest(runtime_id=rid), timeout=10)))
                assert code is grpc.StatusCode.RESOURCE_EXHAUSTED
                assert "3" in details and "--max-watch-streams-per-caller" in details, details
                code, details = code_of(lambda: next(stub.WatchPending(pb.WatchPendingRequest(), timeout=10)))
                assert code is grpc.StatusCode.RESOURCE_EXHAUSTED, details
            finally:
                held[0].cancel()
            again = _open_when_placed(stub, rid)
            for stream in (again, *held):
                stream.cancel()


def _open_when_placed(stub: pb_grpc.AgentRuntimeStub, rid: str) -> grpc.Future:
    """A Watch that got its first event: a stream ended a moment ago gives its place back once the
    daemon has run its cleanup, so a refusal right after the cancel is retried (bounded)."""
    for _ in range(100):
        stream = stub.Watch(pb.WatchRequest(runtime_id=rid), timeout=30)
        try:
            assert next(stream).seq == 1
            return stream
        except grpc.RpcError as err:
            if err.code() is not grpc.StatusCode.RESOURCE_EXHAUSTED:
                raise
            time.sleep(0.1)
    raise AssertionError("a cancelled stream never gave its place back")


def test_a_watch_that_falls_behind_ends_naming_the_seq_to_resume_after(
        big_daemon: DaemonProcess, model: ScriptedModelServer) -> None:
    """A watcher that stops reading while 20 MB of results are committed gets every event queued
    before it fell behind, then RESOURCE_EXHAUSTED naming (message and trailer) the last seq it was
    sent; a Watch after that seq goes on with no gap."""
    channel, stub = open_stub(big_daemon.target)
    with channel, grpc.insecure_channel(big_daemon.target, options=BIG) as reader:
        rid = _writer_runtime(stub, model, 1, 10)
        watch = pb_grpc.AgentRuntimeStub(reader).Watch(pb.WatchRequest(runtime_id=rid), timeout=120)
        seqs = [next(watch).seq]  # the stream is open, so subscribed to what follows
        settle(stub, model, rid, 24, 900_000)  # not read meanwhile
        with pytest.raises(grpc.RpcError) as ended:
            for event in watch:
                seqs.append(event.seq)
        err = ended.value
        assert err.code() is grpc.StatusCode.RESOURCE_EXHAUSTED, err.details()
        after = dict(err.trailing_metadata() or ()).get(RESUME_AFTER)
        assert after == str(seqs[-1]), (after, seqs[-1])
        assert f"after_seq={after}" in (err.details() or ""), err.details()
        assert seqs == list(range(1, seqs[-1] + 1)), "gapless up to the seq it names"
        rest = pb_grpc.AgentRuntimeStub(reader).Watch(pb.WatchRequest(runtime_id=rid, after_seq=int(after)),
                                                      timeout=30)
        assert next(rest).seq == int(after) + 1
        rest.cancel()


def test_the_python_client_resumes_a_watch_that_fell_behind(big_daemon: DaemonProcess,
                                                            model: ScriptedModelServer) -> None:
    """``Runtime.watch`` reopens a stream the daemon ended for falling behind, after the seq the
    daemon named: the iteration sees every seq once, in order."""
    channel, stub = open_stub(big_daemon.target)
    llm = {"style": "openai", "base_url": model.url, "model": "scripted"}
    with channel, Runtime.new(big_daemon.target, registry(agent("writer", "writes")), llm=llm) as rt:
        rid = rt.id
        settle(stub, model, rid, 1, 10)
        with rt.watch() as stream:
            seqs = [next(stream).seq]
            settle(stub, model, rid, 24, 900_000)
            results = 0
            for event in stream:
                seqs.append(event.seq)
                results += event.type == "result"
                if results == 25:
                    break
    assert seqs == list(range(1, seqs[-1] + 1))
    assert stream.reopened >= 1, "the daemon did not end the stream: nothing was tested"


def test_the_asyncio_client_resumes_a_watch_that_fell_behind(big_daemon: DaemonProcess,
                                                             model: ScriptedModelServer) -> None:
    """The same with ``toolnexus_client.aio``: every seq once, in order, across the daemon's end."""
    channel, stub = open_stub(big_daemon.target)
    llm = {"style": "openai", "base_url": model.url, "model": "scripted"}

    async def scenario() -> tuple[list[int], int]:
        rt = await aio.Runtime.new(big_daemon.target, registry(agent("writer", "writes")), llm=llm)
        try:
            await asyncio.to_thread(settle, stub, model, rt.id, 1, 10)
            stream = rt.watch()
            seqs = [(await anext(stream)).seq]
            await asyncio.to_thread(settle, stub, model, rt.id, 24, 900_000)
            results = 0
            async for event in stream:
                seqs.append(event.seq)
                results += event.type == "result"
                if results == 25:
                    break
            stream.cancel()
            return seqs, stream.reopened
        finally:
            await rt.detach()

    with channel:
        seqs, reopened = asyncio.run(scenario())
    assert seqs == list(range(1, seqs[-1] + 1))
    assert reopened >= 1, "the daemon did not end the stream: nothing was tested"
