"""MCP servers as a tool source, with real servers built with the official SDK (docs/mcp.md)."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import grpc

from tests.support.daemon import DaemonProcess
from tests.support.grpc_client import code_of
from toolnexus_devtools import ScriptedModelServer

from .conftest import SERVER, McpServerProcess, Session, calls, free_port, mcp_agent


def test_tools_are_listed_and_called(daemon: DaemonProcess, mcp_server: McpServerProcess) -> None:
    with ScriptedModelServer(calls("example__add", {"a": 2, "b": 3})) as model:
        s = Session(
            daemon.target, model.url, mcp_agent({"name": "example", "url": mcp_server.url}, name="adder")
        )
        _, result = s.run()
        assert (result.status, result.is_error) == ("done", False)
        assert result.text == "5"
        offered = [t["function"]["name"] for t in model.requests[0]["tools"]]
        assert {"example__add", "example__paint", "example__call_info"} <= set(offered)
        s.close()


def test_the_call_id_goes_in_meta(daemon: DaemonProcess, mcp_server: McpServerProcess) -> None:
    with ScriptedModelServer(calls("example__call_info", {})) as model:
        s = Session(
            daemon.target,
            model.url,
            mcp_agent({"name": "example", "url": mcp_server.url, "tools": ["call_info"]}),
        )
        handle, result = s.run()
        meta = json.loads(result.text)
        # the turn's tag (a new one per wake) between the handle and the step: docs/protocol.md §6
        assert re.fullmatch(rf"{re.escape(s.id)}/{re.escape(handle)}/t[0-9a-f]{{12}}/s1c0",
                            meta["toolnexus/call_id"]), meta
        assert [t["function"]["name"] for t in model.requests[0]["tools"]] == ["example__call_info"]
        s.close()


def test_images_are_named_and_sampling_is_refused(
    daemon: DaemonProcess, mcp_server: McpServerProcess
) -> None:
    with ScriptedModelServer(calls("example__picture", {})) as model:
        s = Session(daemon.target, model.url, mcp_agent({"name": "example", "url": mcp_server.url}))
        _, result = s.run()
        assert result.text.startswith("a pixel\n\n[image image/png, ")
        s.close()
    with ScriptedModelServer(calls("example__summarize", {"text": "long"})) as model:
        s = Session(daemon.target, model.url, mcp_agent({"name": "example", "url": mcp_server.url}))
        _, result = s.run()
        assert "Sampling not supported" in result.text or "sampling" in result.text.lower()
        s.close()


def test_an_unreachable_server_at_new_is_unavailable(daemon: DaemonProcess) -> None:
    with ScriptedModelServer() as model:
        url = f"http://127.0.0.1:{free_port()}/mcp"
        try:
            Session(daemon.target, model.url, mcp_agent({"name": "gone", "url": url}))
        except grpc.RpcError as err:
            assert err.code() == grpc.StatusCode.UNAVAILABLE
            assert 'mcp server "gone" of agent "painter" cannot be reached' in (err.details() or "")
        else:
            raise AssertionError("New succeeded")


def test_bad_definitions_are_invalid_argument(daemon: DaemonProcess, mcp_server: McpServerProcess) -> None:
    with ScriptedModelServer() as model:
        for server, expected in [
            (
                {"name": "files"},
                'mcp server "files" has no url and is not configured: the daemon was started '
                "without --mcp-config",
            ),
            ({"name": "bad name", "url": mcp_server.url}, 'mcp server name "bad name" must be'),
            ({"name": "x", "url": "ftp://h/mcp"}, 'mcp server "x": url must be an http:// or https:// URL'),
            ({"name": "x", "url": mcp_server.url, "headers": {"A": "${SECRET}"}}, "--allow-env SECRET"),
            ({"name": "example", "url": mcp_server.url, "tools": ["nope"]}, 'has no tool "nope"'),
        ]:
            code, details = code_of(lambda srv=server: Session(daemon.target, model.url, mcp_agent(srv)))
            assert code == grpc.StatusCode.INVALID_ARGUMENT, details
            assert expected in details, details


def test_a_stdio_server_named_in_mcp_config(tmp_path: Path) -> None:
    import sys

    config = tmp_path / "mcp.json"
    config.write_text(
        json.dumps({"mcpServers": {"local": {"command": sys.executable, "args": [str(SERVER), "--stdio"]}}})
    )
    proc = DaemonProcess(tmp_path / "data", "--mcp-config", str(config)).start()
    try:
        with ScriptedModelServer(calls("local__add", {"a": 40, "b": 2})) as model:
            s = Session(proc.target, model.url, mcp_agent({"name": "local"}))
            _, result = s.run()
            assert result.text.startswith("42")
            code, details = code_of(lambda: Session(proc.target, model.url, mcp_agent({"name": "remote"})))
            assert code == grpc.StatusCode.INVALID_ARGUMENT
            assert f'mcp server "remote" has no url and is not in --mcp-config {config}' in details
            s.close()
    finally:
        proc.stop()


def test_listed_tools_are_stored_with_the_registry(tmp_path: Path, mcp_server: McpServerProcess) -> None:
    """After a restart the stored registry has the listed tools: no New, no listing, the call works."""
    proc = DaemonProcess(tmp_path / "data").start()
    try:
        with ScriptedModelServer(calls("example__add", {"a": 1, "b": 1})) as model:
            s = Session(proc.target, model.url, mcp_agent({"name": "example", "url": mcp_server.url}))
            s.close()
            proc.kill9()
            proc.start()
            again = Session.attach(proc.target, model.url, s.agent, s.id)
            _, result = again.run()
            assert result.text.startswith("2")
            again.close()
    finally:
        proc.stop()


def test_a_restarted_server_gets_a_new_session(daemon: DaemonProcess, mcp_server: McpServerProcess) -> None:
    """The pooled session of a server that restarted is gone on the server's side: the call is made
    on a new session, not failed."""
    with ScriptedModelServer(calls("example__add", {"a": 2, "b": 2})) as model:
        s = Session(daemon.target, model.url, mcp_agent({"name": "example", "url": mcp_server.url}))
        assert s.run()[1].text == "4"
        mcp_server.stop()
        mcp_server.start()
        _, result = s.run()
        assert (result.text, result.is_error) == ("4", False), result.text
        s.close()


def test_list_changed_refreshes_the_tools_for_later_turns(
    daemon: DaemonProcess, mcp_server: McpServerProcess
) -> None:
    with ScriptedModelServer(calls("example__unlock", {})) as model:
        s = Session(daemon.target, model.url, mcp_agent({"name": "example", "url": mcp_server.url}))
        assert s.run()[1].text == "unlocked"
        assert "example__secret" not in [t["function"]["name"] for t in model.requests[0]["tools"]]
        model.script = calls("example__secret", {})
        deadline = time.monotonic() + 10
        while True:
            _, result = s.run()
            offered = [t["function"]["name"] for t in model.requests[-2]["tools"]]
            if "example__secret" in offered or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert result.text == "the secret is 42"
        s.close()


def test_a_timeout_is_an_error_or_for_ask_a_reconcile_question(
    daemon: DaemonProcess, mcp_server: McpServerProcess
) -> None:
    with ScriptedModelServer(calls("example__slow", {"seconds": 5})) as model:
        s = Session(
            daemon.target,
            model.url,
            mcp_agent({"name": "example", "url": mcp_server.url, "timeout_ms": 300}, name="rerunner"),
        )
        _, result = s.run()
        assert result.text == 'mcp server "example" tool "slow" failed: no reply within 300 ms'
        s.close()
        s = Session(
            daemon.target,
            model.url,
            mcp_agent(
                {"name": "example", "url": mcp_server.url, "timeout_ms": 300, "on_crash": "ask"}, name="asker"
            ),
        )
        _, result = s.run()
        assert result.status == "pending" and result.pending.kind == "reconcile", result
        assert "example__slow" in result.pending.prompt
        s.close()
