"""WebhookExecutor against the real scripted server and its approval webhook."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from toolnexus_daemon.model import Answer, HttpConfig, ToolDef, ToolSource
from toolnexus_daemon.tools.base import ToolInvocation
from toolnexus_daemon.tools.webhook import WebhookExecutor
from toolnexus_devtools import Reply, ScriptedModelServer, approval_request_id


def invocation(url: str, *, call_id: str = "call-1", answer: Answer | None = None,
               **http: object) -> ToolInvocation:
    tool = ToolDef(name="approve", source=ToolSource.WEBHOOK,
                   http=HttpConfig(url=url, **http))  # type: ignore[arg-type]
    return ToolInvocation(runtime_id="rt", handle="root/a.1", call_id=call_id, tool=tool,
                          arguments={"what": "deploy"}, answer=answer)


@pytest.fixture
async def executor() -> AsyncIterator[WebhookExecutor]:
    ex = WebhookExecutor(env={"TOKEN": "s3cret"})
    yield ex
    await ex.aclose()


async def test_approval_round_trip(server: ScriptedModelServer, executor: WebhookExecutor) -> None:
    """No answer suspends with an approval request; an ok answer on a new call performs the action."""
    first = await executor.invoke(invocation(server.approval_url))
    assert first.is_error is False
    assert first.pending is not None
    assert first.pending.id == approval_request_id("call-1")  # the action: call-1 has no attempt suffix
    assert (first.pending.kind, first.pending.prompt) == ("approval", "approve?")
    answer = Answer(id=first.pending.id, ok=True)
    second = await executor.invoke(invocation(server.approval_url, call_id="call-2", answer=answer))
    assert (second.output, second.is_error, second.pending) == ("action performed", False, None)


async def test_a_declined_answer_repeats_the_same_request(server: ScriptedModelServer,
                                                          executor: WebhookExecutor) -> None:
    """A not-ok answer gets the identical request back, which the daemon reads as declined."""
    first = await executor.invoke(invocation(server.approval_url))
    assert first.pending is not None
    # the re-invocation is a new attempt of the same call: its action id is unchanged
    again = await executor.invoke(invocation(server.approval_url, call_id="call-1a1",
                                             answer=Answer(id=first.pending.id, ok=False)))
    assert again.pending == first.pending


async def test_the_payload_and_headers_sent(server: ScriptedModelServer, executor: WebhookExecutor) -> None:
    """The webhook gets the pinned JSON shape and ${ENV}-expanded headers."""
    answer = Answer(id="r1", ok=True, data={"k": 1})
    await executor.invoke(invocation(server.approval_url, answer=answer,
                                     headers={"Authorization": "Bearer ${TOKEN}"}))
    seen = server.received[0]
    assert seen.method == "POST"
    assert seen.headers["authorization"] == "Bearer s3cret"
    assert seen.json() == {"call_id": "call-1", "action_id": "call-1", "runtime_id": "rt",
                           "handle": "root/a.1", "tool": "approve",
                           "arguments": {"what": "deploy"},
                           "answer": {"id": "r1", "ok": True, "data": {"k": 1}}}


async def test_no_answer_is_sent_as_null(server: ScriptedModelServer, executor: WebhookExecutor) -> None:
    """A first call carries "answer": null rather than omitting it."""
    await executor.invoke(invocation(server.approval_url))
    assert server.received[0].json()["answer"] is None


async def test_http_method_is_configurable(server: ScriptedModelServer, executor: WebhookExecutor) -> None:
    """http.method replaces the default POST."""
    server.route("/hook", lambda req: {"output": req.method})
    result = await executor.invoke(invocation(server.origin + "/hook", method="put"))
    assert result.output == "PUT"


async def test_metadata_is_passed_through(server: ScriptedModelServer, executor: WebhookExecutor) -> None:
    """The reply's metadata and is_error reach the ToolResult."""
    server.route("/hook", lambda req: {"output": "no", "is_error": True, "metadata": {"code": 7}})
    result = await executor.invoke(invocation(server.origin + "/hook"))
    assert (result.output, result.is_error, result.metadata) == ("no", True, {"code": 7})


async def test_non_2xx_is_an_error_result(server: ScriptedModelServer, executor: WebhookExecutor) -> None:
    """A failing status becomes ``HTTP <status>: <body>`` with is_error."""
    server.route("/hook", lambda req: Reply(500, "boom"))
    result = await executor.invoke(invocation(server.origin + "/hook"))
    assert (result.output, result.is_error) == ("HTTP 500: boom", True)


async def test_invalid_json_is_an_error_result(server: ScriptedModelServer,
                                               executor: WebhookExecutor) -> None:
    """A 2xx that is not JSON becomes an error result saying so."""
    server.route("/hook", lambda req: Reply(200, "<html>"))
    result = await executor.invoke(invocation(server.origin + "/hook"))
    assert result.is_error
    assert result.output == 'webhook tool "approve" returned invalid JSON (HTTP 200): <html>'


@pytest.mark.parametrize("body", [[1, 2], {"output": "x", "pending": "later"}, {"metadata": [1]}])
async def test_malformed_results_are_error_results(server: ScriptedModelServer, executor: WebhookExecutor,
                                                   body: object) -> None:
    """JSON that is not a ToolResult object is reported instead of crashing."""
    server.route("/hook", lambda req: Reply(200, body))
    result = await executor.invoke(invocation(server.origin + "/hook"))
    assert result.is_error
    assert result.output.startswith('webhook tool "approve" returned ')


async def test_unreachable_is_an_error_result(closed_port: int, executor: WebhookExecutor) -> None:
    """A refused connection becomes an error result naming the tool."""
    result = await executor.invoke(invocation(f"http://127.0.0.1:{closed_port}/hook"))
    assert result.is_error
    assert result.output.startswith('webhook tool "approve" unreachable: ConnectError')


async def test_timeout_is_an_error_result(server: ScriptedModelServer, executor: WebhookExecutor) -> None:
    """A reply slower than http.timeout_ms becomes an unreachable error result."""
    server.route("/slow", lambda req: Reply(200, {"output": "late"}, delay=2.0))
    result = await executor.invoke(invocation(server.origin + "/slow", timeout_ms=150))
    assert result.output == 'webhook tool "approve" unreachable: timeout after 150 ms'
    assert result.is_error


async def test_missing_url_is_an_error_result(executor: WebhookExecutor) -> None:
    """A webhook tool without http.url fails as a value."""
    result = await executor.invoke(invocation(""))
    assert (result.output, result.is_error) == ('webhook tool "approve" has no http.url', True)


