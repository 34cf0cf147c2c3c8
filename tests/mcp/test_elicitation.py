"""An MCP elicitation is a durable suspension (docs/mcp.md): answered on the open call while the
daemon and the session live, and by re-invoking the call when either is gone — the server's tool
completes once, with the answer."""

from __future__ import annotations

import json
from pathlib import Path

import grpc

from tests.support.daemon import DaemonProcess
from tests.support.grpc_client import as_dict, code_of
from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_devtools import ScriptedModelServer

from .conftest import McpServerProcess, Session, calls, mcp_agent

PAINT = calls("example__paint", {"wall": "north"})


def _suspend(s: Session) -> tuple[str, pb.Request]:
    handle, result = s.run()
    assert result.status == "pending", result
    return handle, result.pending


def test_a_form_elicitation_suspends_and_is_answered_on_the_open_call(
    daemon: DaemonProcess, mcp_server: McpServerProcess
) -> None:
    with ScriptedModelServer(PAINT) as model:
        s = Session(daemon.target, model.url, mcp_agent({"name": "example", "url": mcp_server.url}))
        handle, req = _suspend(s)
        assert (req.kind, req.prompt) == ("input", "Which color for the north wall?")
        data = as_dict(req.data)
        assert (data["mcp_server"], data["tool"]) == ("example", "paint")
        assert data["requested_schema"]["required"] == ["color"]
        listed = s.stub.ListPending(pb.ListPendingRequest(runtime_id=s.id)).items
        assert [p.request.id for p in listed] == [req.id]

        code, details = code_of(lambda: s.resume(req.id, data={"colour": "red", "coats": "two"}))
        assert code == grpc.StatusCode.INVALID_ARGUMENT
        assert (
            'field "color" is required' in details
            and 'field "colour" is not in the requested schema' in details
        )
        assert 'field "coats" must be an integer' in details
        assert s.stub.Snapshot(pb.SnapshotRequest(runtime_id=s.id, handle=handle)).state == "suspended"

        resumed = s.resume(req.id, data={"color": "red", "coats": 2})
        assert resumed.result.text == "painted the north wall red (2 coat(s))"
        assert mcp_server.completed() == [{"tool": "paint", "wall": "north", "color": "red", "coats": 2}]
        s.close()


def test_decline_and_cancel_reach_the_server(daemon: DaemonProcess, mcp_server: McpServerProcess) -> None:
    with ScriptedModelServer(PAINT) as model:
        s = Session(daemon.target, model.url, mcp_agent({"name": "example", "url": mcp_server.url}))
        _, req = _suspend(s)
        assert s.resume(req.id, ok=False).result.text == "not painted: the user chose decline"
        _, req = _suspend(s)
        resumed = s.resume(req.id, ok=False, reason="cancelled")
        assert resumed.result.text == "not painted: the user chose cancel"
        assert mcp_server.completed() == []
        s.close()


def test_url_mode_is_an_authorization_request(daemon: DaemonProcess, mcp_server: McpServerProcess) -> None:
    with ScriptedModelServer(calls("example__connect_account", {"service": "github"})) as model:
        s = Session(daemon.target, model.url, mcp_agent({"name": "example", "url": mcp_server.url}))
        _, req = _suspend(s)
        assert (req.kind, req.prompt, req.url) == (
            "authorization",
            "Sign in to github to connect it",
            "https://github.example/oauth",
        )
        assert s.resume(req.id, data={"code": "abc"}).result.text == "github: accept"
        s.close()


def test_kill9_between_elicitation_and_answer(tmp_path: Path, mcp_server: McpServerProcess) -> None:
    """The daemon dies with the call open; after the restart the answer re-invokes the call, the
    server asks the same question, and it is answered from the recorded answer: once, no new suspension."""
    proc = DaemonProcess(tmp_path / "data").start()
    try:
        with ScriptedModelServer(PAINT) as model:
            s = Session(proc.target, model.url, mcp_agent({"name": "example", "url": mcp_server.url}))
            handle, req = _suspend(s)
            s.close()
            proc.kill9()
            proc.start()
            again = Session.attach(proc.target, model.url, s.agent, s.id)
            code, _ = code_of(lambda: again.resume(req.id, data={"color": 7}))
            assert code == grpc.StatusCode.INVALID_ARGUMENT
            resumed = again.resume(req.id, data={"color": "blue"})
            assert resumed.result.status == "done", resumed.result
            assert resumed.result.text == "painted the north wall blue (1 coat(s))"
            assert mcp_server.completed() == [{"tool": "paint", "wall": "north", "color": "blue", "coats": 1}]
            events = again.stub.Watch(pb.WatchRequest(runtime_id=s.id, handle=handle), timeout=2)
            suspended = _count_suspensions(events)
            assert suspended == 1
            again.close()
    finally:
        proc.stop()


def test_the_mcp_server_restarted_between_elicitation_and_answer(
    daemon: DaemonProcess, mcp_server: McpServerProcess
) -> None:
    with ScriptedModelServer(PAINT) as model:
        s = Session(daemon.target, model.url, mcp_agent({"name": "example", "url": mcp_server.url}))
        _, req = _suspend(s)
        mcp_server.stop()
        mcp_server.start()
        resumed = s.resume(req.id, data={"color": "green", "coats": 3})
        assert resumed.result.text == "painted the north wall green (3 coat(s))"
        assert mcp_server.completed() == [{"tool": "paint", "wall": "north", "color": "green", "coats": 3}]
        s.close()


def _count_suspensions(events: object) -> int:
    count = 0
    try:
        for event in events:  # type: ignore[attr-defined]
            if event.to_state == "suspended":
                count += 1
    except grpc.RpcError:
        pass
    return count


def test_an_input_required_result_is_a_suspension_holding_nothing_open(
    tmp_path: Path, mcp_server: McpServerProcess
) -> None:
    """On the 2026-07-28 protocol (``"protocol": "auto"`` in --mcp-config) the server asks with an
    input-required result: the call suspends, and the answer — live, or after a kill -9 — is sent
    back with a retry of the call carrying the server's request state."""
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"modern": {"url": mcp_server.url, "protocol": "auto"}}}))
    proc = DaemonProcess(tmp_path / "data", "--mcp-config", str(config)).start()
    try:
        with ScriptedModelServer(calls("modern__repaint", {"wall": "east"})) as model:
            s = Session(proc.target, model.url, mcp_agent({"name": "modern"}))
            _, req = _suspend(s)
            assert (req.kind, req.prompt) == ("input", "Which color for the east wall?")
            assert as_dict(req.data)["requested_schema"]["required"] == ["color"]
            resumed = s.resume(req.id, data={"color": "white"})
            assert resumed.result.text == "repainted the east wall white (1 coat(s))"

            _, req = _suspend(s)
            s.close()
            proc.kill9()
            proc.start()
            again = Session.attach(proc.target, model.url, s.agent, s.id)
            resumed = again.resume(req.id, ok=False, reason="cancelled")
            assert resumed.result.text == "not repainted: the user chose cancel"
            assert [(d["color"], d["protocol"]) for d in mcp_server.completed()] == [("white", "2026-07-28")]
            again.close()
    finally:
        proc.stop()


def test_a_url_elicitation_is_answered_by_its_answer_link(
    tmp_path: Path, mcp_server: McpServerProcess
) -> None:
    """The OAuth redirect lands on the answer link (``GET …?code=…&state=…``): the server's URL-mode
    elicitation is accepted and its tool finishes."""
    import httpx

    proc = DaemonProcess(tmp_path / "data", "--answers-listen", "127.0.0.1:0").start()
    try:
        with ScriptedModelServer(calls("example__connect_account", {"service": "gitlab"})) as model:
            agent = mcp_agent({"name": "example", "url": mcp_server.url})
            agent.answer_link = True
            s = Session(proc.target, model.url, agent)
            handle, req = _suspend(s)
            assert req.kind == "authorization" and req.answer_url.startswith("http://127.0.0.1:")
            reply = httpx.get(req.answer_url, params={"code": "c0de", "state": "s1"}, timeout=10)
            assert reply.status_code == 200, reply.text
            done = s.stub.Wait(pb.WaitRequest(runtime_id=s.id, handle=handle, timeout_ms=30000))
            assert done.text == "gitlab: accept"
            s.close()
    finally:
        proc.stop()
