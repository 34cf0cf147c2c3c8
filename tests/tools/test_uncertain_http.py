"""Webhook and http tools marked ``on_crash: "ask"`` (docs/protocol.md §11), against real servers on
127.0.0.1: a request that was sent and got no response is of unknown outcome; a refused
connection provably did nothing and stays an ordinary error result. Every request carries
``Idempotency-Key: <call_id>``."""

from __future__ import annotations

import socket
import threading
from collections.abc import AsyncIterator, Iterator

import pytest

from toolnexus_daemon.model import HttpConfig, OnCrash, ToolDef, ToolSource
from toolnexus_daemon.tools.base import OutcomeUnknown, ToolInvocation
from toolnexus_daemon.tools.http_tool import HttpToolExecutor
from toolnexus_daemon.tools.webhook import WebhookExecutor
from toolnexus_devtools import Reply, ScriptedModelServer

Executor = WebhookExecutor | HttpToolExecutor


def invocation(source: ToolSource, url: str, on_crash: OnCrash = OnCrash.ASK,
               **http: object) -> ToolInvocation:
    tool = ToolDef(name="charge", source=source, on_crash=on_crash,
                   http=HttpConfig(url=url, method="POST", **http))  # type: ignore[arg-type]
    return ToolInvocation(runtime_id="rt", handle="root/a.1", call_id="rt/root/a.1/s1c0", tool=tool,
                          arguments={"amount": 5})


@pytest.fixture(params=[ToolSource.WEBHOOK, ToolSource.HTTP])
def source(request: pytest.FixtureRequest) -> ToolSource:
    return ToolSource(request.param)


@pytest.fixture
async def executor(source: ToolSource) -> AsyncIterator[Executor]:
    ex: Executor = WebhookExecutor(env={}) if source is ToolSource.WEBHOOK else HttpToolExecutor(env={})
    yield ex
    await ex.aclose()


@pytest.fixture
def hangup_url() -> Iterator[str]:
    """A server that reads the request, then closes the connection without answering."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.settimeout(10)

    def serve() -> None:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        with conn:
            conn.recv(65536)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}/charge"
    listener.close()
    thread.join(10)


async def test_a_timeout_after_the_request_was_sent_is_an_unknown_outcome(
        source: ToolSource, server: ScriptedModelServer, executor: Executor) -> None:
    server.route("/slow", lambda req: Reply(200, {"output": "late"}, delay=2.0))
    with pytest.raises(OutcomeUnknown, match="timeout after 150 ms"):
        await executor.invoke(invocation(source, server.origin + "/slow", timeout_ms=150))


async def test_a_connection_lost_mid_request_is_an_unknown_outcome(
        source: ToolSource, hangup_url: str, executor: Executor) -> None:
    with pytest.raises(OutcomeUnknown, match='tool "charge" unreachable'):
        await executor.invoke(invocation(source, hangup_url))


async def test_a_refused_connection_did_nothing_and_stays_an_error_result(
        source: ToolSource, closed_port: int, executor: Executor) -> None:
    result = await executor.invoke(invocation(source, f"http://127.0.0.1:{closed_port}/charge"))
    assert result.is_error and "unreachable: ConnectError" in result.output


async def test_a_rerun_tool_keeps_the_error_result_for_a_timeout(
        source: ToolSource, server: ScriptedModelServer, executor: Executor) -> None:
    server.route("/slow", lambda req: Reply(200, {"output": "late"}, delay=2.0))
    result = await executor.invoke(invocation(source, server.origin + "/slow", OnCrash.RERUN, timeout_ms=150))
    assert result.is_error and result.output.endswith("unreachable: timeout after 150 ms")


async def test_every_request_carries_the_call_id_as_its_idempotency_key(
        source: ToolSource, server: ScriptedModelServer, executor: Executor) -> None:
    server.route("/charge", lambda req: {"output": "charged"})
    await executor.invoke(invocation(source, server.origin + "/charge"))
    await executor.invoke(invocation(source, server.origin + "/charge", headers={"idempotency-key": "mine"}))
    keys = [r.headers.get("idempotency-key") for r in server.received]
    assert keys == ["rt/root/a.1/s1c0", "mine"], "the tool's own header wins"
