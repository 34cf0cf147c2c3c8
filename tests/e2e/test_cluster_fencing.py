"""Ownership belongs to one daemon process, and an owner fences itself (docs/operations.md, "Cluster").

Real daemons as subprocesses on one real PostgreSQL database, with a short lease. What each test
makes impossible:

- a second process under a live node id owning what the first one owns (it is refused at start);
- a daemon started without ``--advertise`` serving the runtimes of another (every daemon on
  PostgreSQL holds leases);
- an owner cut off from the database (a proxy that stalls: nothing forwarded, nothing dropped)
  answering reads with its old state once its lease may have moved;
- a paused owner (SIGSTOP past its lease, SIGCONT) answering a read with stale state or making a
  model or tool call for the runtime another daemon took over.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import grpc
import psycopg
import pytest

from tests.e2e.test_cluster import _owner, _suspend
from tests.support.daemon import DaemonProcess
from tests.support.grpc_client import approval_agent, open_stub, openai_llm
from tests.support.pg import PgServer
from tests.support.pg_fixtures import pg_dsn, pg_server
from tests.support.pg_proxy import StallingProxy
from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_daemon.api._gen import runtime_pb2_grpc as pb_grpc
from toolnexus_devtools import ScriptedModelServer
from toolnexus_devtools.approval_tool import DONE
from toolnexus_devtools.model_server import Reply

__all__ = ["pg_dsn", "pg_server"]

LEASE_MS = 1000
MARGIN_MS = 200  # the daemon's: a fifth of the lease
Stub = pb_grpc.AgentRuntimeStub


class Daemon:
    def __init__(self, base: Path, name: str, dsn: str, *extra: str, node_id: str | None = None,
                 listen: tuple[str, ...] = ("127.0.0.1:0",)) -> None:
        args = ["--store", dsn, "--lease-ms", str(LEASE_MS), *extra]
        if node_id is not None:
            args += ["--node-id", node_id]
        self.proc = DaemonProcess(base / name, *args, listen=listen)
        self._channel: grpc.Channel | None = None
        self.stub: Stub

    def start(self) -> Daemon:
        self.proc.start()
        self._channel, self.stub = open_stub(self.proc.target)
        return self

    @property
    def pid(self) -> int:
        assert self.proc.proc is not None
        return self.proc.proc.pid

    def close(self) -> None:
        if self._channel is not None:
            self._channel.close()
        self.proc.stop()


@pytest.fixture
def model() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as server:
        yield server


@pytest.fixture
def daemons() -> Iterator[list[Daemon]]:
    started: list[Daemon] = []
    yield started
    for d in started:
        d.close()


def _up(daemons: list[Daemon], d: Daemon) -> Daemon:
    daemons.append(d)
    return d.start()


def _retry(call: Any, deadline_s: float = 20.0) -> Any:
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            return call()
        except grpc.RpcError as err:
            if err.code() not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED) \
                    or time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def _webhook_calls(model: ScriptedModelServer) -> int:
    return sum(1 for r in model.received if r.path.startswith("/tools/approval"))


def test_a_second_process_under_a_live_node_id_is_refused(pg_dsn: str, tmp_path: Path, daemons: list[Daemon],
                                                          model: ScriptedModelServer) -> None:
    """Before: fencing compared node names only, so a second process under the same id passed every
    check; both served the runtime (a tool call ran twice, a new handle id was handed out twice)."""
    a = _up(daemons, Daemon(tmp_path, "a", pg_dsn, "--advertise", "127.0.0.1:0", node_id="same"))
    rid, handle, request_id = _suspend(a.stub, model)
    twin = Daemon(tmp_path, "twin", pg_dsn, "--advertise", "127.0.0.1:0", node_id="same")
    with pytest.raises(RuntimeError, match="exited with 2"):
        twin.proc.start(timeout=30)
    address = a.proc.target
    assert f'node id "same" is in use by another live toolnexus-daemon at {address}' in twin.proc.logs()
    assert "--node-id" in twin.proc.logs()
    answer = pb.ResumeRequest(runtime_id=rid, answer=pb.Answer(id=request_id, ok=True))
    out = a.stub.Resume(answer, timeout=20)
    assert out.result.text == DONE
    spawned = a.stub.Spawn(pb.SpawnRequest(runtime_id=rid, agent="approver"), timeout=10)
    assert spawned.handle == "root/approver.2"
    assert _webhook_calls(model) == 2  # the suspending call and the approved one: nothing ran twice
    assert _owner(pg_dsn, rid)[0] == "same"


def test_a_daemon_without_advertise_owns_its_runtimes_beside_one_with_it(
        pg_dsn: str, tmp_path: Path, daemons: list[Daemon], model: ScriptedModelServer) -> None:
    """Before: a daemon without --advertise was no member: it loaded every runtime and served it, and a
    member beside it took the same runtimes over (split brain). Now both hold leases: one owner, one
    state, whichever daemon a call reaches."""
    plain = _up(daemons, Daemon(tmp_path, "plain", pg_dsn))  # TCP on 127.0.0.1: its address is known
    member = _up(daemons, Daemon(tmp_path, "member", pg_dsn, "--advertise", "127.0.0.1:0"))
    rid, handle, _ = _suspend(plain.stub, model)
    owner = _owner(pg_dsn, rid)[0]
    spawned = member.stub.Spawn(pb.SpawnRequest(runtime_id=rid, agent="approver"), timeout=10)
    assert spawned.handle == "root/approver.2"
    again = plain.stub.Spawn(pb.SpawnRequest(runtime_id=rid, agent="approver"), timeout=10)
    assert again.handle == "root/approver.3"  # one sequence of handle ids: one owner
    through = [{h.id for h in d.stub.List(pb.ListRequest(runtime_id=rid), timeout=10).handles}
               for d in (plain, member)]
    assert through[0] == through[1] and {handle, "root/approver.2", "root/approver.3"} <= through[0]
    assert _owner(pg_dsn, rid)[0] == owner
    info = plain.stub.Info(pb.InfoRequest(), timeout=10)
    assert info.node and info.advertise == plain.proc.target


def test_a_daemon_on_a_unix_socket_only_owns_its_runtimes_and_says_it_cannot_be_forwarded_to(
        pg_dsn: str, tmp_path: Path, daemons: list[Daemon], model: ScriptedModelServer) -> None:
    sock = f"unix:{tmp_path}/d.sock"
    hidden = _up(daemons, Daemon(tmp_path, "hidden", pg_dsn, listen=(sock,)))
    member = _up(daemons, Daemon(tmp_path, "member", pg_dsn, "--advertise", "127.0.0.1:0"))
    rid, _, _ = _suspend(hidden.stub, model)
    info = hidden.stub.Info(pb.InfoRequest(), timeout=10)
    assert info.advertise == "" and "add --advertise" in info.config["advertise"]
    assert hidden.proc.has_logged("not reachable by other daemons")
    with pytest.raises(grpc.RpcError) as err:
        member.stub.Snapshot(pb.SnapshotRequest(runtime_id=rid, handle="root/approver.1"), timeout=10)
    assert err.value.code() is grpc.StatusCode.UNAVAILABLE
    assert "started without --advertise" in (err.value.details() or "")
    assert _owner(pg_dsn, rid)[0] == info.node


def _proxied(dsn: str, proxy: StallingProxy) -> str:
    return proxy.dsn(urlsplit(dsn).path.lstrip("/"))


def test_an_owner_cut_off_from_the_database_serves_no_stale_read(
        pg_server: PgServer, pg_dsn: str, tmp_path: Path, daemons: list[Daemon],
        model: ScriptedModelServer) -> None:
    """Before: an owner whose database connection went silent kept answering Snapshot and Wait from
    memory while another daemon took the runtime over and moved it on."""
    proxy = StallingProxy(pg_server.socket_dir)
    proxy.start()
    try:
        cut = _up(daemons, Daemon(tmp_path, "cut", _proxied(pg_dsn, proxy), "--advertise", "127.0.0.1:0"))
        other = _up(daemons, Daemon(tmp_path, "other", pg_dsn, "--advertise", "127.0.0.1:0"))
        rid, handle, request_id = _suspend(cut.stub, model)
        snap = pb.SnapshotRequest(runtime_id=rid, handle=handle)
        assert cut.stub.Snapshot(snap, timeout=5).state == "suspended"
        watched: dict[str, Any] = {"seqs": []}

        def watch() -> None:
            try:
                for event in cut.stub.Watch(pb.WatchRequest(runtime_id=rid), timeout=20):
                    watched["seqs"].append(event.seq)
            except grpc.RpcError as err:
                watched["end"] = (err.code(), err.details())

        watcher = threading.Thread(target=watch)
        watcher.start()
        time.sleep(0.3)
        proxy.stall()
        stalled_at = time.monotonic()
        refused_after = None
        while time.monotonic() - stalled_at < 5:
            try:
                cut.stub.Snapshot(snap, timeout=2)
            except grpc.RpcError as err:
                assert err.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
                refused_after = time.monotonic() - stalled_at
                break
            time.sleep(0.01)
        assert refused_after is not None, "the cut-off owner kept answering from memory"
        print(f"\ncut-off owner's first refusal {refused_after * 1000:.0f} ms after the cut "
              f"(lease {LEASE_MS} ms, margin {MARGIN_MS} ms)")
        assert refused_after < (LEASE_MS - MARGIN_MS) / 1000 + 0.5
        watcher.join(10)
        code, details = watched["end"]  # the stream ended, naming where to resume
        assert code is grpc.StatusCode.UNAVAILABLE and f"after_seq={watched['seqs'][-1]}" in details, details
        out = _retry(lambda: other.stub.Resume(
            pb.ResumeRequest(runtime_id=rid, answer=pb.Answer(id=request_id, ok=True)), timeout=5))
        assert out.result.text == DONE and _owner(pg_dsn, rid)[0] != "cut"
        for _ in range(5):  # through the cut-off daemon: never the suspended state it had
            try:
                seen = cut.stub.Snapshot(snap, timeout=2)
            except grpc.RpcError as err:
                assert err.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
                continue
            assert seen.state == "idle" and seen.last_result.text == DONE
        assert cut.proc.has_logged("runtime lease not renewed in time")
    finally:
        proxy.resume()
        try:
            seen = _retry(lambda: cut.stub.Snapshot(snap, timeout=5))  # forwarded to the new owner now
            assert seen.state == "idle" and seen.last_result.text == DONE
        finally:
            for d in daemons:
                d.close()
            daemons.clear()
            proxy.close()


def test_a_paused_owner_reads_nothing_stale_and_calls_nothing_after_it_wakes(
        pg_dsn: str, tmp_path: Path, daemons: list[Daemon], model: ScriptedModelServer) -> None:
    """Before: SIGSTOP past the lease, SIGCONT, and the old owner answered a read from memory and retried
    its model call for a runtime another daemon had taken over; at shutdown it logged an unretrieved
    LeaseLost."""
    a = _up(daemons, Daemon(tmp_path, "a", pg_dsn, "--advertise", "127.0.0.1:0"))
    b = _up(daemons, Daemon(tmp_path, "b", pg_dsn, "--advertise", "127.0.0.1:0"))
    # the model asks A to come back in 2 s (Retry-After): A's retry is due while it is stopped
    model.push(Reply(status=503, body={"error": {"message": "busy"}}, headers={"Retry-After": "2"}))
    new = pb.NewRequest(agents=[approval_agent("approver", model.approval_url)],
                        llm=openai_llm(model.url, retries=2, timeout_ms=20_000))
    rid = a.stub.New(new, timeout=10).runtime_id
    handle = a.stub.Spawn(pb.SpawnRequest(runtime_id=rid, agent="approver"), timeout=10).handle
    a.stub.Wake(pb.WakeRequest(runtime_id=rid, handle=handle, prompt="do the thing"), timeout=10)
    deadline = time.monotonic() + 10
    while model.calls < 1:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    asked_at = time.monotonic()
    os.kill(a.pid, signal.SIGSTOP)
    try:
        # B takes the runtime over (A stopped renewing) and runs the turn itself: model, webhook, pending
        pending = _retry(lambda: b.stub.Wait(pb.WaitRequest(runtime_id=rid, handle=handle, timeout_ms=3000),
                                             timeout=4))
        while pending.status != "pending":
            assert time.monotonic() < deadline + 10
            pending = _retry(lambda: b.stub.Wait(pb.WaitRequest(runtime_id=rid, handle=handle,
                                                                timeout_ms=3000), timeout=4))
        spawned = b.stub.Spawn(pb.SpawnRequest(runtime_id=rid, agent="approver"), timeout=10).handle
        time.sleep(max(0.0, asked_at + 2.5 - time.monotonic()))  # A's retry is overdue
        model_calls, hook_calls = model.calls, _webhook_calls(model)
        listed: dict[str, Any] = {}

        def read_through_a() -> None:
            try:
                got = a.stub.List(pb.ListRequest(runtime_id=rid), timeout=10)
                listed["ids"] = {h.id for h in got.handles}
            except grpc.RpcError as err:
                listed["error"] = err.code()

        reader = threading.Thread(target=read_through_a)
        reader.start()
        time.sleep(0.2)  # the read waits in A's socket while A is stopped
    finally:
        os.kill(a.pid, signal.SIGCONT)
    reader.join(15)
    assert listed.get("error") in (None, grpc.StatusCode.UNAVAILABLE), listed
    if "ids" in listed:
        assert spawned in listed["ids"], f"a stale read through the paused owner: {listed['ids']}"
    time.sleep(1.5)
    assert (model.calls, _webhook_calls(model)) == (model_calls, hook_calls), \
        "the paused owner called the model or the tool for a runtime it no longer owned"
    assert a.proc.stop() == 0
    assert "Future exception was never retrieved" not in a.proc.logs()
    assert "was never retrieved" not in a.proc.logs()


def test_a_call_for_a_dead_owners_runtime_says_a_takeover_is_coming_and_when(
        pg_dsn: str, tmp_path: Path, daemons: list[Daemon], model: ScriptedModelServer) -> None:
    """Before: a call through a survivor failed with gRPC's own words about the dead daemon's address
    ("failed to connect to all addresses … 127.0.0.1:N: Connection refused") for a whole lease. The
    owner here counts as on another machine (its process is not named), so its death cannot be told
    from silence and its lease is waited out."""
    a = _up(daemons, Daemon(tmp_path, "a", pg_dsn, "--advertise", "127.0.0.1:0", node_id="a"))
    b = _up(daemons, Daemon(tmp_path, "b", pg_dsn, "--advertise", "127.0.0.1:0", node_id="b"))
    rid, handle, _ = _suspend(a.stub, model)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(b"UPDATE tn_nodes SET process = '' WHERE node = 'a'")
    a.proc.kill9()
    snap = pb.SnapshotRequest(runtime_id=rid, handle=handle)
    with pytest.raises(grpc.RpcError) as err:
        b.stub.Snapshot(snap, timeout=5)
    details = err.value.details() or ""
    assert err.value.code() is grpc.StatusCode.UNAVAILABLE
    assert f'runtime "{rid}" is owned by daemon a at {a.proc.target}, which does not answer' in details
    assert "its lease runs out within" in details and "any daemon then takes the runtime over: retry then" \
        in details
    assert _retry(lambda: b.stub.Snapshot(snap, timeout=5), deadline_s=LEASE_MS / 1000 + 10).state == \
        "suspended"
