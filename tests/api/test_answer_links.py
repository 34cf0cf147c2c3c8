"""Answer links against a real daemon (``--answers-listen 127.0.0.1:0``) with a real HTTP client:
every status of docs/protocol.md §10, the OAuth redirect, and the token kept out of the store."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import grpc
import httpx
import pytest

from tests.support.answer_links import answers_base, linked_daemon, park, sign_in_agent, token_of
from tests.support.daemon import DaemonProcess, run_store
from tests.support.grpc_client import approval_agent, code_of, open_stub, openai_llm
from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_daemon.api._gen import runtime_pb2_grpc as pb_grpc
from toolnexus_devtools import Reply, ScriptedModelServer

JSON_ACCEPT = {"Accept": "application/json"}


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    proc = linked_daemon(tmp_path_factory.mktemp("data"))
    proc.start()
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def stub(daemon: DaemonProcess) -> Iterator[pb_grpc.AgentRuntimeStub]:
    channel, stub = open_stub(daemon.target)
    yield stub
    channel.close()


@pytest.fixture
def http() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=15) as client:
        yield client


def _wait(stub: pb_grpc.AgentRuntimeStub, rid: str, handle: str) -> pb.TaskResult:
    return stub.Wait(pb.WaitRequest(runtime_id=rid, handle=handle, timeout_ms=10_000), timeout=15)


def test_a_suspension_gets_a_link_announced_on_wait_snapshot_list_and_watch(
        stub: pb_grpc.AgentRuntimeStub, model: ScriptedModelServer, http: httpx.Client) -> None:
    """The link starts with the daemon's base; GET (JSON) shows the request it answers."""
    agent = approval_agent("approver", model.approval_url)
    agent.tools[0].answer_link = True
    rid = stub.New(pb.NewRequest(agents=[agent], llm=openai_llm(model.url)), timeout=5).runtime_id
    handle = stub.Spawn(pb.SpawnRequest(runtime_id=rid, agent="approver"), timeout=5).handle
    live = stub.Watch(pb.WatchRequest(runtime_id=rid, types=["pending"]), timeout=20)
    try:
        stub.Wake(pb.WakeRequest(runtime_id=rid, handle=handle, prompt="do the thing"), timeout=5)
        announced = next(iter(live)).pending.answer_url
    finally:
        live.cancel()
    pending = _wait(stub, rid, handle).pending
    url = pending.answer_url
    assert url == announced and url.startswith(answers_base(stub) + "/a/") and len(token_of(url)) == 43
    snap = stub.Snapshot(pb.SnapshotRequest(runtime_id=rid, handle=handle), timeout=5)
    assert snap.pending.answer_url == url
    listed = stub.List(pb.ListRequest(runtime_id=rid), timeout=5)
    assert [h.pending.answer_url for h in listed.handles if h.id == handle] == [url]
    got = http.get(url, headers=JSON_ACCEPT)
    assert got.status_code == 200, got.text
    assert got.headers["cache-control"] == "no-store" and got.headers["referrer-policy"] == "no-referrer"
    body = got.json()
    request = body["request"]
    assert (body["state"], request["id"], request["kind"]) == ("pending", pending.id, "approval")
    assert body["request"]["prompt"] == pending.prompt and "answer_url" not in body["request"]
    assert http.head(url).status_code == 200


def test_post_answers_then_duplicate_then_conflict_then_gone(
        stub: pb_grpc.AgentRuntimeStub, model: ScriptedModelServer, http: httpx.Client) -> None:
    """POST {ok} answers without the runtime key; the same again is a duplicate, another 409,
    and the used link shows 410."""
    parked = park(stub, model)
    url = parked.pending.answer_url
    first = http.post(url, json={"ok": True})
    assert first.status_code == 200, first.text
    assert (first.json()["state"], first.json()["handle"]) == ("answered", parked.handle)
    done = _wait(stub, parked.runtime, parked.handle)
    assert (done.status, done.text) == ("done", "action performed")
    again = http.post(url, json={"ok": True})
    assert (again.status_code, again.json()["state"]) == (200, "duplicate")
    other = http.post(url, json={"ok": False, "reason": "changed my mind"})
    assert other.status_code == 409 and "different answer" in other.json()["message"]
    shown = http.get(url, headers=JSON_ACCEPT)
    assert (shown.status_code, shown.json()["state"]) == (410, "answered")


def test_a_protected_runtime_is_answered_through_its_link_without_the_key(
        daemon: DaemonProcess, model: ScriptedModelServer, http: httpx.Client) -> None:
    """The link is the capability: gRPC Resume needs the runtime key, the link does not."""
    channel = grpc.insecure_channel(daemon.target)
    keyed = pb_grpc.AgentRuntimeStub(grpc.intercept_channel(channel, _KeyInterceptor("s3cret")))
    try:
        parked = park(keyed, model)
        plain = pb_grpc.AgentRuntimeStub(channel)
        answer = pb.ResumeRequest(runtime_id=parked.runtime, answer=pb.Answer(id=parked.pending.id, ok=True))
        code, _ = code_of(lambda: plain.Resume(answer, timeout=5))
        assert code is grpc.StatusCode.PERMISSION_DENIED
        assert http.post(parked.pending.answer_url, json={"ok": True}).status_code == 200
        assert _wait(keyed, parked.runtime, parked.handle).status == "done"
    finally:
        channel.close()


class _KeyInterceptor(grpc.UnaryUnaryClientInterceptor):  # type: ignore[misc]
    def __init__(self, key: str) -> None:
        self._key = key

    def intercept_unary_unary(self, continuation, details, request):  # type: ignore[no-untyped-def]
        metadata = [*(details.metadata or []), ("x-toolnexus-runtime-key", self._key)]
        return continuation(details._replace(metadata=metadata), request)


def test_a_form_decline_with_a_reason_reaches_the_tool(
        stub: pb_grpc.AgentRuntimeStub, model: ScriptedModelServer, http: httpx.Client) -> None:
    parked = park(stub, model)
    page = http.get(parked.pending.answer_url, headers={"Accept": "text/html"})
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "script-src" not in page.headers["content-security-policy"]
    assert "default-src 'none'" in page.headers["content-security-policy"]
    assert parked.pending.prompt in page.text and 'value="approve"' in page.text
    sent = http.post(parked.pending.answer_url, data={"decision": "decline", "reason": "not today"})
    assert sent.status_code == 200 and "close this page" in sent.text
    assert _wait(stub, parked.runtime, parked.handle).status == "done"
    told = [m["content"] for body in model.requests for m in body["messages"] if m.get("role") == "tool"]
    assert told == [f"declined/expired: {parked.pending.prompt}"]
    used = http.get(parked.pending.answer_url, headers=JSON_ACCEPT).json()
    assert (used["state"], used["answer"]) == ("answered", {"ok": False, "reason": "not today"})


def test_cancelled_link_is_gone(stub: pb_grpc.AgentRuntimeStub, model: ScriptedModelServer,
                                http: httpx.Client) -> None:
    parked = park(stub, model)
    stub.Close(pb.CloseRequest(runtime_id=parked.runtime, handle=parked.handle), timeout=10)
    assert http.get(parked.pending.answer_url, headers=JSON_ACCEPT).json()["state"] == "cancelled"
    gone = http.post(parked.pending.answer_url, json={"ok": True})
    assert (gone.status_code, gone.json()["state"]) == (410, "cancelled")


def test_expired_link_is_gone(stub: pb_grpc.AgentRuntimeStub, model: ScriptedModelServer,
                              http: httpx.Client) -> None:
    # a deadline a little ahead: Wait sees the suspension, then the deadline fires (one already
    # past could fire, and the turn finish, before Wait looked)
    due = (datetime.now(UTC) + timedelta(seconds=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
    model.route("/expired", lambda req: Reply(body={"output": "", "pending": {
        "id": "late", "kind": "approval", "prompt": "too late", "expires_at": due}}))
    agent = approval_agent("late", model.origin + "/expired")
    agent.answer_link = True  # the agent asks, not the tool
    parked = park(stub, model, agent=agent)
    assert parked.pending.answer_url
    deadline = time.monotonic() + 20
    while (settled := _wait(stub, parked.runtime, parked.handle)).status == "pending":
        assert time.monotonic() < deadline, "the request never expired"
        time.sleep(0.1)
    assert settled.text == "declined/expired: too late"
    shown = http.get(parked.pending.answer_url, headers=JSON_ACCEPT)
    assert (shown.status_code, shown.json()["state"]) == (410, "expired")
    assert http.post(parked.pending.answer_url, json={"ok": True}).status_code == 410


def test_no_link_unless_asked_and_runtime_option_asks_for_all(
        stub: pb_grpc.AgentRuntimeStub, model: ScriptedModelServer) -> None:
    assert park(stub, model, tool_link=False).pending.answer_url == ""
    everyone = park(stub, model, tool_link=False, options=pb.RuntimeOptions(answer_link=True))
    assert everyone.pending.answer_url


def test_unknown_tokens_wrong_methods_and_bad_bodies(
        stub: pb_grpc.AgentRuntimeStub, model: ScriptedModelServer, http: httpx.Client) -> None:
    parked = park(stub, model)
    url, base = parked.pending.answer_url, answers_base(stub)
    forged = base + "/a/" + "A" * 43
    assert http.get(forged, headers=JSON_ACCEPT).status_code == 404
    assert http.post(forged, json={"ok": True}).status_code == 404
    assert http.get(base + "/a/" + "x" * 5000).status_code == 404
    assert http.get(base + "/elsewhere").status_code == 404
    assert http.get(url, headers={"X-Pad": "x" * 100_000}).status_code == 400  # a head far past 16 KiB
    assert http.put(url, json={"ok": True}).status_code == 405
    assert http.delete(url).headers["allow"] == "GET, HEAD, POST"
    as_json = {"Content-Type": "application/json"}
    assert http.post(url, content=b"{not json", headers=as_json).status_code == 400
    assert http.post(url, json={"ok": "yes"}).status_code == 400
    assert http.post(url, json={"ok": True, "data": [1]}).status_code == 400
    assert http.post(url, content=b"ok", headers={"Content-Type": "text/plain"}).status_code == 415
    assert http.post(url, data={"decision": "maybe"}).status_code == 400
    huge = http.post(url, json={"ok": True, "data": {"x": "y" * 100_000}})
    assert huge.status_code == 413
    # none of those answered it
    assert http.get(url, headers=JSON_ACCEPT).json()["state"] == "pending"


def test_oauth_redirect_answers_an_authorization_request(
        stub: pb_grpc.AgentRuntimeStub, model: ScriptedModelServer, http: httpx.Client) -> None:
    seen: list[dict[str, object]] = []
    parked = park(stub, model, agent=sign_in_agent(model, seen))
    assert parked.pending.kind == "authorization"
    assert http.head(parked.pending.answer_url + "?code=abc123&state=xyz").status_code == 200  # not an answer
    assert http.get(parked.pending.answer_url, headers=JSON_ACCEPT).json()["state"] == "pending"
    landed = http.get(parked.pending.answer_url + "?code=abc123&state=xyz", headers={"Accept": "text/html"})
    assert landed.status_code == 200 and "close this page" in landed.text
    done = _wait(stub, parked.runtime, parked.handle)
    assert done.status == "done"
    answered = [c["answer"] for c in seen if isinstance(c.get("answer"), dict)]
    assert answered and answered[-1]["data"] == {"code": "abc123", "state": "xyz"}  # type: ignore[index]
    again = http.get(parked.pending.answer_url + "?code=abc123&state=xyz", headers=JSON_ACCEPT)
    assert (again.status_code, again.json()["state"]) == (200, "duplicate")


def test_the_token_is_never_stored_or_logged_and_the_link_survives_a_restart(
        tmp_path: Path, model: ScriptedModelServer) -> None:
    proc = linked_daemon(tmp_path / "data")
    proc.start()
    try:
        channel, stub = open_stub(proc.target)
        parked = park(stub, model)
        channel.close()
        token = token_of(parked.pending.answer_url)
        proc.stop()
        if run_store() == "lmdb":
            stored = b"".join(p.read_bytes() for p in (tmp_path / "data").rglob("*") if p.is_file())
            assert parked.pending.id.encode() in stored and token.encode() not in stored
        assert not any(token in line for line in proc.log_lines)
        proc.start()
        channel, stub = open_stub(proc.target)
        url = answers_base(stub) + "/a/" + token  # the port changed; the token did not
        with httpx.Client(timeout=15) as http:
            assert http.post(url, json={"ok": True}).status_code == 200
        assert _wait(stub, parked.runtime, parked.handle).status == "done"
        channel.close()
    finally:
        proc.stop()


def test_asking_for_links_without_a_listener_is_refused(tmp_path: Path, model: ScriptedModelServer) -> None:
    proc = DaemonProcess(tmp_path / "data").start()
    try:
        channel, stub = open_stub(proc.target)
        agent = approval_agent("approver", model.approval_url)
        agent.answer_link = True
        code, details = code_of(lambda: stub.New(pb.NewRequest(agents=[agent], llm=openai_llm(model.url)),
                                                 timeout=5))
        assert code is grpc.StatusCode.FAILED_PRECONDITION and "--answers-listen" in details
        channel.close()
    finally:
        proc.stop()


def test_a_link_after_the_definition_changed_answers_on_the_handles_own_version(
        stub: pb_grpc.AgentRuntimeStub, model: ScriptedModelServer, http: httpx.Client) -> None:
    """A reattaching New changed the suspended tool's schema: the handle still runs the registry
    version it suspended under (docs/versions.md), so the link's answer is accepted and fed to the
    tool that asked; a Resume that upgrades to the new version would have been refused."""
    parked = park(stub, model)
    url = parked.pending.answer_url
    changed = approval_agent("approver", model.approval_url)
    changed.tools[0].answer_link = True
    changed.tools[0].input_schema.update({"type": "object", "properties": {"amount": {"type": "number"}},
                                          "required": ["amount"]})
    stub.New(pb.NewRequest(runtime_id=parked.runtime, agents=[changed], llm=openai_llm(model.url)), timeout=5)
    code, said = code_of(lambda: stub.Resume(pb.ResumeRequest(
        runtime_id=parked.runtime, answer=pb.Answer(id=parked.pending.id, ok=True), upgrade=True), timeout=5))
    assert code is grpc.StatusCode.FAILED_PRECONDITION and 'tool "approve" changed' in said, said
    assert http.post(url, json={"ok": True}).status_code == 200
    done = _wait(stub, parked.runtime, parked.handle)
    assert (done.status, done.text) == ("done", "action performed")
    snap = stub.Snapshot(pb.SnapshotRequest(runtime_id=parked.runtime, handle=parked.handle), timeout=5)
    assert snap.version == 1
