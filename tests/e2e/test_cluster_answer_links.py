"""Answer links in a cluster (docs/protocol.md §10): two real daemons on one real PostgreSQL
database, each serving answer links. A link minted by the owner of a runtime works on the other
daemon too: it finds the link in the shared database and forwards the answer to the owner, the
link vouching for it in place of the runtime key."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import httpx
import pytest

from tests.support.answer_links import answers_base, park, token_of
from tests.support.daemon import DaemonProcess
from tests.support.grpc_client import approval_agent, code_of, open_stub, openai_llm
from tests.support.pg_fixtures import pg_dsn, pg_server
from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_daemon.api._gen import runtime_pb2_grpc as pb_grpc
from toolnexus_devtools import ScriptedModelServer

__all__ = ["pg_dsn", "pg_server"]

TOKEN = "cluster-secret-token"


class _KeyInterceptor(grpc.UnaryUnaryClientInterceptor):  # type: ignore[misc]
    def __init__(self, *metadata: tuple[str, str]) -> None:
        self._metadata = list(metadata)

    def intercept_unary_unary(self, continuation, details, request):  # type: ignore[no-untyped-def]
        metadata = [*(details.metadata or []), *self._metadata]
        return continuation(details._replace(metadata=metadata), request)


@pytest.fixture
def nodes(pg_dsn: str, tmp_path: Path) -> Iterator[list[DaemonProcess]]:
    (tmp_path / "token").write_text(TOKEN)
    procs = [DaemonProcess(tmp_path / name, "--store", pg_dsn, "--advertise", "127.0.0.1:0",
                           "--node-id", name, "--lease-ms", "1500", "--answers-listen", "127.0.0.1:0",
                           "--token-file", str(tmp_path / "token"))
             for name in ("a", "b")]
    try:
        for proc in procs:
            proc.start()
        yield procs
    finally:
        for proc in procs:
            proc.stop()


def _stub(proc: DaemonProcess, *metadata: tuple[str, str]) -> tuple[grpc.Channel, pb_grpc.AgentRuntimeStub]:
    channel, _ = open_stub(proc.target)
    auth = ("authorization", f"Bearer {TOKEN}")
    intercepted = grpc.intercept_channel(channel, _KeyInterceptor(auth, *metadata))
    return channel, pb_grpc.AgentRuntimeStub(intercepted)


def test_a_link_answered_on_another_daemon_reaches_the_owner(nodes: list[DaemonProcess]) -> None:
    owner, other = nodes
    with ScriptedModelServer() as model:
        channel_a, keyed_a = _stub(owner, ("x-toolnexus-runtime-key", "k1"))
        channel_b, plain_b = _stub(other)
        try:
            parked = park(keyed_a, model)
            on_b = answers_base(plain_b) + "/a/" + token_of(parked.pending.answer_url)
            assert not on_b.startswith(answers_base(keyed_a))
            # the runtime is protected: a plain Resume through b is refused for want of the key
            answer = pb.Answer(id=parked.pending.id, ok=True)
            resume = pb.ResumeRequest(runtime_id=parked.runtime, answer=answer)
            code, _ = code_of(lambda: plain_b.Resume(resume, timeout=10))
            assert code is grpc.StatusCode.PERMISSION_DENIED
            with httpx.Client(timeout=20) as http:
                shown = http.get(on_b, headers={"Accept": "application/json"})
                assert (shown.status_code, shown.json()["state"]) == (200, "pending")
                sent = http.post(on_b, json={"ok": True})
                assert (sent.status_code, sent.json()["state"]) == (200, "answered"), sent.text
                wait = pb.WaitRequest(runtime_id=parked.runtime, handle=parked.handle, timeout_ms=10_000)
                assert keyed_a.Wait(wait, timeout=15).status == "done"
                again = http.post(on_b, json={"ok": True})
                assert (again.status_code, again.json()["state"]) == (200, "duplicate")
                assert http.post(on_b, json={"ok": False}).status_code == 409
        finally:
            channel_a.close()
            channel_b.close()


def test_a_link_forwarded_after_the_definition_changed_answers_on_the_handles_version(
        nodes: list[DaemonProcess]) -> None:
    """A New changed the tool since it asked: the handle runs the registry version it suspended
    under (docs/versions.md), so the answer forwarded from the other daemon's link is accepted and
    fed to the tool that asked; a different answer after it is ``conflict``."""
    owner, other = nodes
    with ScriptedModelServer() as model:
        channel_a, stub_a = _stub(owner)
        channel_b, stub_b = _stub(other)
        try:
            parked = park(stub_a, model)
            changed = approval_agent("approver", model.approval_url)
            changed.tools[0].answer_link = True
            changed.tools[0].input_schema.update({"type": "object", "properties": {"n": {"type": "number"}}})
            stub_a.New(pb.NewRequest(runtime_id=parked.runtime, agents=[changed], llm=openai_llm(model.url)),
                       timeout=10)
            on_b = answers_base(stub_b) + "/a/" + token_of(parked.pending.answer_url)
            with httpx.Client(timeout=20) as http:
                accepted = http.post(on_b, json={"ok": True})
                assert accepted.status_code == 200, accepted.text
                other_answer = http.post(on_b, json={"ok": False})
                assert (other_answer.status_code, other_answer.json()["state"]) == (409, "conflict")
            snap = stub_a.Snapshot(pb.SnapshotRequest(runtime_id=parked.runtime, handle=parked.handle),
                                   timeout=10)
            assert snap.version == 1
        finally:
            channel_a.close()
            channel_b.close()
