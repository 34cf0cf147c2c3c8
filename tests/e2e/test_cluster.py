"""Three daemons on one real PostgreSQL database form one service (docs/protocol.md §9).

Each daemon is a real subprocess with ``--store`` the same database, ``--advertise
127.0.0.1:0`` (its own port, resolved) and a short lease. Calls go through plain gRPC stubs to
whichever daemon the test picks: a call for a runtime another daemon owns is forwarded there,
and a runtime whose owner died is taken over by a survivor. The tool is the demo approval
webhook (the daemon calls it over HTTP), so no worker stream has to follow the runtime.
"""

from __future__ import annotations

import os
import signal
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import grpc
import psycopg
import pytest

from tests.e2e.test_crash_reattach import AGENT, connect, free_port
from tests.ops.certs import make_certs
from tests.support.daemon import DaemonProcess
from tests.support.grpc_client import approval_agent, open_stub, openai_llm
from tests.support.pg_fixtures import pg_dsn, pg_server
from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_daemon.api._gen import runtime_pb2_grpc as pb_grpc
from toolnexus_devtools import ScriptedModelServer
from toolnexus_devtools.model_server import Reply, chat_response

__all__ = ["pg_dsn", "pg_server"]

LEASE_MS = 1500
Stub = pb_grpc.AgentRuntimeStub


class Node:
    def __init__(self, name: str, dsn: str, base: Path, listen: tuple[str, ...] = ("127.0.0.1:0",),
                 env: dict[str, str] | None = None) -> None:
        self.name = name
        self.proc = DaemonProcess(base / name, "--store", dsn, "--advertise", "127.0.0.1:0",
                                  "--node-id", name, "--lease-ms", str(LEASE_MS),
                                  "--metrics-listen", "127.0.0.1:0", listen=listen, env=env)
        self._channel: grpc.Channel | None = None
        self.stub: Stub

    def start(self) -> Node:
        self.proc.start()
        if self._channel is not None:
            self._channel.close()
        self._channel, self.stub = open_stub(self.proc.target)
        return self

    def metric(self, name: str) -> float:
        """One unlabelled sample of this daemon's Prometheus endpoint."""
        address = self.stub.Info(pb.InfoRequest(), timeout=10).metrics_address
        with urllib.request.urlopen(f"http://{address}/metrics", timeout=10) as reply:
            text = reply.read().decode()
        return float(next(line.split()[1] for line in text.splitlines() if line.startswith(name + " ")))

    def close(self) -> None:
        if self._channel is not None:
            self._channel.close()
        self.proc.stop()


@contextmanager
def running(names: tuple[str, ...], pg_dsn: str, tmp_path: Path) -> Iterator[dict[str, Node]]:
    """Daemons named ``names`` on one database, started in order and all closed at the end."""
    nodes = {name: Node(name, pg_dsn, tmp_path) for name in names}
    try:
        for node in nodes.values():
            node.start()
        yield nodes
    finally:
        for node in nodes.values():
            node.close()


@pytest.fixture
def cluster(pg_dsn: str, tmp_path: Path) -> Iterator[dict[str, Node]]:
    with running(("a", "b", "c"), pg_dsn, tmp_path) as nodes:
        yield nodes


@pytest.fixture
def model() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as server:
        yield server


def _suspend(stub: Stub, model: ScriptedModelServer) -> tuple[str, str, str]:
    new = pb.NewRequest(agents=[approval_agent("approver", model.approval_url)], llm=openai_llm(model.url))
    rid = stub.New(new, timeout=10).runtime_id
    handle = stub.Spawn(pb.SpawnRequest(runtime_id=rid, agent="approver"), timeout=10).handle
    stub.Wake(pb.WakeRequest(runtime_id=rid, handle=handle, prompt="do the thing"), timeout=10)
    result = stub.Wait(pb.WaitRequest(runtime_id=rid, handle=handle, timeout_ms=15_000), timeout=20)
    assert result.status == "pending", result
    return rid, handle, result.pending.id


def _events(stub: Stub, rid: str, until_idle: str) -> list[pb.Event]:
    """Watch from the start until ``until_idle`` goes idle (bounded by the call's deadline)."""
    out = []
    for event in stub.Watch(pb.WatchRequest(runtime_id=rid), timeout=20):
        out.append(event)
        if event.type == "transition" and event.handle == until_idle and event.to_state == "idle":
            break
    return out


def _owner(dsn: str, rid: str) -> tuple[str, int]:
    """Who holds the runtime's lease, and at which epoch, as the database says."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(b"SELECT owner, epoch FROM tn_leases WHERE rid = %s", (rid,)).fetchone()
    assert row is not None
    return str(row[0]), int(row[1])


def _retry(call, deadline_s: float = 20.0):  # type: ignore[no-untyped-def]
    """A call a client retries on UNAVAILABLE (the owner is dying or its lease is moving)."""
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            return call()
        except grpc.RpcError as err:
            if err.code() is not grpc.StatusCode.UNAVAILABLE or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_any_daemon_takes_any_call(cluster: dict[str, Node], model: ScriptedModelServer, pg_dsn: str) -> None:
    """Created through A, woken and watched through B, answered through C: one runtime, one story."""
    a, b, c = cluster["a"].stub, cluster["b"].stub, cluster["c"].stub
    rid, handle, request_id = _suspend(a, model)
    snap = b.Snapshot(pb.SnapshotRequest(runtime_id=rid, handle=handle), timeout=10)  # forwarded to A
    assert (snap.state, snap.pending.id) == ("suspended", request_id)

    out = c.Resume(pb.ResumeRequest(runtime_id=rid, answer=pb.Answer(id=request_id, ok=True)), timeout=20)
    assert (out.result.status, out.result.text) == ("done", "action performed")
    again = b.Resume(pb.ResumeRequest(runtime_id=rid, answer=pb.Answer(id=request_id, ok=True)), timeout=20)
    assert again.duplicate

    events = _events(b, rid, handle)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert any(e.type == "pending" for e in events) and any(e.type == "resumed" for e in events)
    assert _owner(pg_dsn, rid) == ("a", 1)  # B and C forwarded; nobody took the runtime from A
    info = b.Info(pb.InfoRequest(), timeout=10)
    members = {n.node: n for n in info.cluster}
    assert info.node == "b" and info.advertise == cluster["b"].proc.target
    assert set(members) == {"a", "b", "c"} and rid in members["a"].runtimes
    assert members["a"].address == cluster["a"].proc.target
    assert cluster["a"].proc.has_logged('"msg": "joined the cluster"')
    assert cluster["b"].metric("toolnexus_cluster_forwarded_calls_total") >= 3  # Snapshot, Resume, Watch
    assert cluster["a"].metric("toolnexus_cluster_runtimes_owned") >= 1


def test_a_killed_owner_is_taken_over_and_nothing_is_lost(cluster: dict[str, Node],
                                                          model: ScriptedModelServer, pg_dsn: str) -> None:
    """kill -9 of the owner while a handle is suspended: within about one lease another daemon owns
    the runtime, the answer sent there finishes the turn, and every acknowledged event is kept."""
    a, b = cluster["a"], cluster["b"]
    rid, handle, request_id = _suspend(a.stub, model)
    before = _events_so_far(b.stub, rid)
    a.proc.kill9()
    killed = time.monotonic()
    out = _retry(lambda: b.stub.Resume(
        pb.ResumeRequest(runtime_id=rid, answer=pb.Answer(id=request_id, ok=True)), timeout=20))
    taken_after = time.monotonic() - killed
    assert (out.result.status, out.result.text) == ("done", "action performed")
    assert taken_after < 4 * LEASE_MS / 1000, taken_after
    events = _events(b.stub, rid, handle)
    assert [e.seq for e in events[:len(before)]] == [e.seq for e in before]  # nothing acknowledged lost
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    owner, epoch = _owner(pg_dsn, rid)
    assert owner in ("b", "c") and epoch == 2
    assert cluster[owner].metric("toolnexus_cluster_takeovers_total") == 1


def _events_so_far(stub: Stub, rid: str) -> list[pb.Event]:
    out = []
    try:
        for event in stub.Watch(pb.WatchRequest(runtime_id=rid), timeout=2):
            out.append(event)
    except grpc.RpcError as err:
        assert err.code() is grpc.StatusCode.DEADLINE_EXCEEDED
    return out


def test_a_paused_owner_is_fenced_out(cluster: dict[str, Node], model: ScriptedModelServer) -> None:
    """SIGSTOP the owner past its lease; another daemon takes over and commits; after SIGCONT the old
    owner's next commit is refused and it forgets the runtime: the data is the new owner's."""
    a, b = cluster["a"], cluster["b"]
    rid, handle, request_id = _suspend(a.stub, model)
    assert a.proc.proc is not None
    os.kill(a.proc.proc.pid, signal.SIGSTOP)
    try:
        time.sleep(LEASE_MS / 1000 * 1.5)
        spawned = _retry(lambda: b.stub.Spawn(pb.SpawnRequest(runtime_id=rid, agent="approver"), timeout=10))
        assert spawned.handle == "root/approver.2"
    finally:
        os.kill(a.proc.proc.pid, signal.SIGCONT)
    assert a.proc.has_logged("runtime lost to another daemon", timeout=3 * LEASE_MS / 1000), a.proc.logs()
    answer = pb.ResumeRequest(runtime_id=rid, answer=pb.Answer(id=request_id, ok=True))
    out = a.stub.Resume(answer, timeout=20)
    assert out.result.text == "action performed"  # through A, forwarded to the new owner
    listed = b.stub.List(pb.ListRequest(runtime_id=rid), timeout=10)
    assert {h.id for h in listed.handles} >= {handle, "root/approver.2"}


def test_sigterm_hands_over_without_waiting_for_the_lease(pg_dsn: str, tmp_path: Path,
                                                           model: ScriptedModelServer) -> None:
    a = Node("a", pg_dsn, tmp_path).start()
    b = Node("b", pg_dsn, tmp_path).start()
    try:
        rid, handle, request_id = _suspend(a.stub, model)
        started = time.monotonic()
        assert a.proc.stop() == 0
        out = _retry(lambda: b.stub.Resume(
            pb.ResumeRequest(runtime_id=rid, answer=pb.Answer(id=request_id, ok=True)), timeout=20))
        assert out.result.text == "action performed"
        assert time.monotonic() - started < LEASE_MS / 1000 + 5
        assert a.proc.has_logged("runtime lease released")
    finally:
        a.close()
        b.close()


def test_a_worker_connected_to_another_daemon_is_relayed_to_the_owner(cluster: dict[str, Node],
                                                                      model: ScriptedModelServer,
                                                                      pg_dsn: str) -> None:
    """The app's tools are served by a worker whose Connect stream reaches a non-owner: the stream is
    relayed to the owner, which sends it the tool call of the resumed turn."""
    a, b, c = cluster["a"], cluster["b"], cluster["c"]
    first = connect(a.proc.target, "openai", model.url)
    handle = first.spawn(first.root, AGENT)
    first.wake(handle, "please perform the secret action")
    pending = first.wait(handle, timeout=30)
    assert pending.status == "pending" and pending.pending is not None
    rid = first.id
    first.detach()  # the worker on A goes away

    second = connect(b.proc.target, "openai", model.url, runtime_id=rid)  # New and Connect through B
    try:
        assert second.reattached
        answer = pb.ResumeRequest(runtime_id=rid, answer=pb.Answer(id=pending.pending.id, ok=True))
        out = c.stub.Resume(answer, timeout=30)
        assert (out.result.status, out.result.text) == ("done", "action performed")
        assert _owner(pg_dsn, rid)[0] == "a"
    finally:
        second.detach()


def test_a_turn_running_on_a_killed_owner_finishes_on_a_survivor(cluster: dict[str, Node],
                                                                 model: ScriptedModelServer) -> None:
    """kill -9 while the owner waits on a model call: the sweeper of a survivor takes the runtime
    over without any call naming it, re-issues the model call and finishes the turn."""
    a, b = cluster["a"], cluster["b"]
    model.push(Reply(delay=30, body=chat_response("never seen")))  # the owner dies waiting on this
    new = pb.NewRequest(agents=[pb.AgentDef(name="talker", does="talks")], llm=openai_llm(model.url))
    rid = a.stub.New(new, timeout=10).runtime_id
    handle = a.stub.Spawn(pb.SpawnRequest(runtime_id=rid, agent="talker"), timeout=10).handle
    a.stub.Wake(pb.WakeRequest(runtime_id=rid, handle=handle, prompt="hello"), timeout=10)
    deadline = time.monotonic() + 10
    while model.calls < 1:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    a.proc.kill9()
    deadline = time.monotonic() + 6 * LEASE_MS / 1000
    while model.calls < 2:  # nobody calls the runtime: the re-issued model call is the sweeper's doing
        assert time.monotonic() < deadline, "no survivor took the running turn over"
        time.sleep(0.05)
    result = _retry(lambda: b.stub.Wait(pb.WaitRequest(runtime_id=rid, handle=handle, timeout_ms=15_000),
                                        timeout=20))
    assert result.status == "done" and result.text


def test_a_purge_through_a_non_owner_removes_the_runtime_everywhere(cluster: dict[str, Node],
                                                                     model: ScriptedModelServer) -> None:
    a, b, c = cluster["a"].stub, cluster["b"].stub, cluster["c"].stub
    rid, _, _ = _suspend(a, model)
    b.Shutdown(pb.ShutdownRequest(runtime_id=rid, purge=True), timeout=20)  # forwarded to A
    for stub in (a, b, c):
        with pytest.raises(grpc.RpcError) as gone:
            stub.List(pb.ListRequest(runtime_id=rid), timeout=10)
        assert gone.value.code() is grpc.StatusCode.NOT_FOUND


def test_a_restarted_sidecar_relays_its_app_to_the_new_owner(pg_dsn: str, tmp_path: Path,
                                                            model: ScriptedModelServer) -> None:
    """An app's sidecar is killed and comes back on the same address while another daemon has taken
    its runtime over: the app's client reconnects its worker to its own sidecar, which relays it to
    the new owner, and the answer (sent to a third daemon) runs the app's tool there."""
    port = free_port()
    a = Node("a", pg_dsn, tmp_path, listen=(f"127.0.0.1:{port}",)).start()
    b = Node("b", pg_dsn, tmp_path).start()
    try:
        with connect(a.proc.target, "openai", model.url) as app:
            handle = app.spawn(app.root, AGENT)
            app.wake(handle, "please perform the secret action")
            pending = app.wait(handle, timeout=30).pending
            assert pending is not None and app.worker is not None
            a.proc.kill9()
            _retry(lambda: b.stub.Snapshot(pb.SnapshotRequest(runtime_id=app.id, handle=handle), timeout=10))
            a.proc.start()  # the same address: the app's worker comes back to its own sidecar
            app.worker.wait_welcomed(2, timeout=30)
            answer = pb.ResumeRequest(runtime_id=app.id, answer=pb.Answer(id=pending.id, ok=True))
            out = _retry(lambda: b.stub.Resume(answer, timeout=30))
            assert (out.result.status, out.result.text) == ("done", "action performed")
            assert _owner(pg_dsn, app.id)[0] == "b"
    finally:
        a.close()
        b.close()


def test_the_token_and_the_runtime_key_travel_with_a_forwarded_call(pg_dsn: str, tmp_path: Path,
                                                                   model: ScriptedModelServer) -> None:
    """Both daemons require the token; the runtime has a key: a call through B reaches A with both,
    and one without the key is refused by the owner, not let through by the forwarder."""
    env = {"TOOLNEXUS_TOKEN": "cluster-secret"}
    a = Node("a", pg_dsn, tmp_path, env=env).start()
    b = Node("b", pg_dsn, tmp_path, env=env).start()
    token = ("authorization", "Bearer cluster-secret")
    try:
        new = pb.NewRequest(agents=[approval_agent("approver", model.approval_url)],
                            llm=openai_llm(model.url), runtime_key="rt-key")
        rid = a.stub.New(new, metadata=(token,), timeout=10).runtime_id
        keyed = (token, ("x-toolnexus-runtime-key", "rt-key"))
        spawned = b.stub.Spawn(pb.SpawnRequest(runtime_id=rid, agent="approver"), metadata=keyed, timeout=10)
        assert spawned.handle == "root/approver.1"
        with pytest.raises(grpc.RpcError) as refused:
            b.stub.List(pb.ListRequest(runtime_id=rid), metadata=(token,), timeout=10)
        assert refused.value.code() is grpc.StatusCode.PERMISSION_DENIED
        with pytest.raises(grpc.RpcError) as anonymous:
            b.stub.List(pb.ListRequest(runtime_id=rid), timeout=10)
        assert anonymous.value.code() is grpc.StatusCode.UNAUTHENTICATED
    finally:
        a.close()
        b.close()


def test_daemons_under_mtls_forward_to_each_other(pg_dsn: str, tmp_path: Path,
                                                  model: ScriptedModelServer) -> None:
    """Every daemon serves TLS and requires client certificates signed by the cluster's CA; a call
    through B reaches A over mTLS with B's own certificate."""
    certs = make_certs(tmp_path / "certs")
    tls = ("--tls-cert", str(certs.peer.cert), "--tls-key", str(certs.peer.key),
           "--tls-client-ca", str(certs.ca))
    procs = [DaemonProcess(tmp_path / name, "--store", pg_dsn, "--advertise", "127.0.0.1:0",
                           "--node-id", name, "--lease-ms", str(LEASE_MS), *tls) for name in ("a", "b")]
    cert, key = certs.client.read()
    creds = grpc.ssl_channel_credentials(certs.ca.read_bytes(), key, cert)
    try:
        for proc in procs:
            proc.start()
        stubs = []
        for proc in procs:
            channel = grpc.secure_channel(proc.target, creds)
            stubs.append(pb_grpc.AgentRuntimeStub(channel))
        rid, handle, request_id = _suspend(stubs[0], model)
        answer = pb.ResumeRequest(runtime_id=rid, answer=pb.Answer(id=request_id, ok=True))
        out = stubs[1].Resume(answer, timeout=20)  # forwarded over mTLS
        assert (out.result.status, out.result.text) == ("done", "action performed")
        assert _owner(pg_dsn, rid) == ("a", 1)
    finally:
        for proc in procs:
            proc.stop()
