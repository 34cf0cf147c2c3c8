"""A PostgreSQL outage in the middle of a turn: the turn ends by itself once the database is back.

The model's reply is held by the scripted server until the database is stopped (the real
server, ``pg_ctl stop``), released during the outage — so the daemon can neither commit the
reply nor record a failure — and the database is started again. The handle must reach its
right end (``done``) within a bound after the database is back, ``Wait`` must return it, the
handle must take the next ``Wake``, and the transcript must hold each message once: what the
daemon could not commit is redone from the turn's last checkpoint, as after a restart.
Once for one daemon, once for two daemons of a cluster on one database.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import grpc
import pytest

from tests.support.daemon import DaemonProcess
from tests.support.grpc_client import approval_agent, open_stub, openai_llm
from tests.support.pg import PgServer
from tests.support.pg_fixtures import pg_dsn, pg_server
from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_daemon.api._gen import runtime_pb2_grpc as pb_grpc
from toolnexus_devtools import ScriptedModelServer
from toolnexus_devtools.model_server import chat_response, tool_call

__all__ = ["pg_dsn", "pg_server"]

T = TypeVar("T")
Stub = pb_grpc.AgentRuntimeStub
# how long the handle may take to reach its end once the database is back: the link's reconnect
# probe (backoff up to 5 s), the engine's retry of the turn, one model call
BACK_WITHIN_S = 20.0
# longer than the outage: the owner keeps its runtimes through it (no take-over hides the bug)
LEASE_MS = 8000


class HeldModel:
    """The model: the first request is answered only once the test releases it; ``approve``
    agents call the approval webhook first, then answer with its output."""

    def __init__(self) -> None:
        self.asked = threading.Event()
        self.release = threading.Event()
        self.calls = 0
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self.calls += 1
            first = self.calls == 1
        if first:
            self.asked.set()
            self.release.wait(60)
        messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
        tools = body.get("tools") or []
        if messages and messages[-1].get("role") == "tool":
            return chat_response(content=str(messages[-1].get("content") or ""), usage=(2, 1, 3))
        if tools:
            return chat_response(tool_calls=[tool_call("approve", {})], usage=(3, 2, 5))
        return chat_response(content="ok after the outage", usage=(2, 1, 3))


def retrying(call: Callable[[], T], within_s: float) -> T:
    """``call`` again while the daemon answers UNAVAILABLE (the database or the owner is away)."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            return call()
        except grpc.RpcError as err:
            if err.code() is not grpc.StatusCode.UNAVAILABLE or time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def wait_for(stub: Stub, rid: str, handle: str, want: str, within_s: float) -> pb.TaskResult:
    """Wait (retried across UNAVAILABLE) until the handle's result has status ``want``."""
    deadline = time.monotonic() + within_s
    while True:
        left = max(0.5, deadline - time.monotonic())
        request = pb.WaitRequest(runtime_id=rid, handle=handle, timeout_ms=int(left * 1000))
        result: pb.TaskResult = retrying(partial(stub.Wait, request, timeout=left + 5), within_s)
        if result.status == want or time.monotonic() > deadline:
            return result


def outage_during_reply(server: PgServer, model: HeldModel) -> float:
    """Stop the database while the model call is in flight, release the reply during the outage,
    give the daemon time to try its commit, start the database again; returns when it was back."""
    assert model.asked.wait(20), "the model was never asked"
    server.stop()
    try:
        model.release.set()
        time.sleep(1.5)  # the reply arrives and its commit is refused: the database is down
    finally:
        server.start()
    return time.monotonic()


def check_transcript_once(stub: Stub, rid: str, handle: str) -> None:
    """Every committed message once: nothing of the refused commit was written twice."""
    snap = retrying(lambda: stub.Snapshot(pb.SnapshotRequest(runtime_id=rid, handle=handle), timeout=10), 20)
    assert snap.state == "idle", snap
    events = []
    try:
        for event in stub.Watch(pb.WatchRequest(runtime_id=rid, after_seq=0), timeout=2):
            events.append(event)
    except grpc.RpcError as err:
        assert err.code() is grpc.StatusCode.DEADLINE_EXCEEDED, err
    seqs = [e.seq for e in events]
    assert seqs == list(range(1, len(seqs) + 1)), seqs
    results = [e for e in events if e.handle == handle and e.type == "result"]
    ends = [(r.result.status, r.result.text) for r in results]
    assert [status for status, _ in ends][-1:] == ["done"], ends


@pytest.fixture
def held() -> Iterator[tuple[ScriptedModelServer, HeldModel]]:
    script = HeldModel()
    with ScriptedModelServer(script=script) as server:
        yield server, script


def test_one_daemon_finishes_the_turn_once_the_database_is_back(
        tmp_path: Path, pg_server: PgServer, pg_dsn: str,
        held: tuple[ScriptedModelServer, HeldModel]) -> None:
    """Before: the reply's commit and the failure's record were both refused; the handle stayed
    ``running`` with no turn, Wait never returned and Wake was refused until a restart."""
    server, model = held
    daemon = DaemonProcess(tmp_path / "unused", "--store", pg_dsn).start()
    channel, stub = open_stub(daemon.target)
    try:
        talker = pb.AgentDef(name="talker", does="answers", soul="You answer briefly.")
        rid = stub.New(pb.NewRequest(agents=[talker], llm=openai_llm(server.url, timeout_ms=60_000)),
                       timeout=10).runtime_id
        handle = stub.Spawn(pb.SpawnRequest(runtime_id=rid, agent="talker"), timeout=10).handle
        stub.Wake(pb.WakeRequest(runtime_id=rid, handle=handle, prompt="hello"), timeout=10)

        back = outage_during_reply(pg_server, model)

        result = wait_for(stub, rid, handle, "done", BACK_WITHIN_S)
        assert (result.status, result.text) == ("done", "ok after the outage"), daemon.logs()[-3000:]
        took = time.monotonic() - back
        print(f"\nthe turn ended {took:.1f} s after the database was back")
        assert took < BACK_WITHIN_S + 5
        check_transcript_once(stub, rid, handle)
        assert daemon.has_logged("turns continued from their last checkpoint"), daemon.logs()[-3000:]
        again = stub.Wake(pb.WakeRequest(runtime_id=rid, handle=handle, prompt="and again?"), timeout=10)
        assert again is not None  # not refused: the handle is idle, not stuck running
        assert wait_for(stub, rid, handle, "done", 20).status == "done"
    finally:
        channel.close()
        daemon.stop()


class Pair:
    """Two daemons of a cluster on one database, each with a stub."""

    def __init__(self, dsn: str, base: Path) -> None:
        self.procs = [DaemonProcess(base / name, "--store", dsn, "--advertise", "127.0.0.1:0",
                                    "--node-id", name, "--lease-ms", str(LEASE_MS)) for name in ("a", "b")]
        self.stubs: list[Stub] = []
        self._channels: list[grpc.Channel] = []

    def start(self) -> Pair:
        for proc in self.procs:
            proc.start()
            channel, stub = open_stub(proc.target)
            self._channels.append(channel)
            self.stubs.append(stub)
        return self

    def logs(self) -> str:
        return "\n".join(f"{i}: {line}" for i, p in enumerate(self.procs) for line in p.log_lines[-40:])

    def close(self) -> None:
        for channel in self._channels:
            channel.close()
        for proc in self.procs:
            proc.stop()


@contextmanager
def pair(dsn: str, base: Path) -> Iterator[Pair]:
    daemons = Pair(dsn, base)
    try:
        yield daemons.start()
    finally:
        daemons.close()


def test_a_cluster_of_two_finishes_the_turn_once_the_database_is_back(
        tmp_path: Path, pg_server: PgServer, pg_dsn: str,
        held: tuple[ScriptedModelServer, HeldModel]) -> None:
    """The held reply asks for the approval webhook: after the outage the turn is redone, the tool
    suspends it, the answer (sent through the other daemon) finishes it; both daemons agree."""
    server, model = held
    with pair(pg_dsn, tmp_path) as daemons:
        a, b = daemons.stubs
        agent = approval_agent("approver", server.approval_url)
        rid = a.New(pb.NewRequest(agents=[agent], llm=openai_llm(server.url, timeout_ms=60_000)),
                    timeout=10).runtime_id
        handle = a.Spawn(pb.SpawnRequest(runtime_id=rid, agent="approver"), timeout=10).handle
        a.Wake(pb.WakeRequest(runtime_id=rid, handle=handle, prompt="do the thing"), timeout=10)

        outage_during_reply(pg_server, model)

        pending = wait_for(b, rid, handle, "pending", BACK_WITHIN_S)
        assert pending.status == "pending", (pending, daemons.logs())
        answer = pb.ResumeRequest(runtime_id=rid, answer=pb.Answer(id=pending.pending.id, ok=True))
        resumed = retrying(lambda: b.Resume(answer, timeout=20), 20)
        result = resumed.result if resumed.result.status == "done" else wait_for(a, rid, handle, "done", 20)
        assert (result.status, result.text) == ("done", "action performed"), (result, daemons.logs())
        for stub in (a, b):
            asked = pb.SnapshotRequest(runtime_id=rid, handle=handle)
            snap = retrying(partial(stub.Snapshot, asked, timeout=10), 20)
            assert snap.state == "idle", snap
        check_transcript_once(a, rid, handle)
        # the handle takes the next wake (not refused as still running)
        again = pb.WakeRequest(runtime_id=rid, handle=handle, prompt="again")
        retrying(lambda: b.Wake(again, timeout=10), 20)
        assert wait_for(a, rid, handle, "pending", 20).status == "pending"
