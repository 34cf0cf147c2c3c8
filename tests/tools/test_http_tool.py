"""HttpToolExecutor against a real echoing endpoint on the scripted server."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator

import pytest

from toolnexus_daemon.model import JSON, HttpConfig, ToolDef, ToolSource
from toolnexus_daemon.tools.base import ToolInvocation
from toolnexus_daemon.tools.http_tool import HttpToolExecutor, fill_url, split_arguments
from toolnexus_devtools import Received, Reply, ScriptedModelServer


def echo(req: Received) -> JSON:
    """Reply with what arrived, so a test can assert on the request."""
    return {"method": req.method, "path": req.path, "query": req.query,
            "auth": req.headers.get("authorization"), "body": req.json()}


def invocation(url: str, arguments: JSON, **http: object) -> ToolInvocation:
    tool = ToolDef(name="rest", source=ToolSource.HTTP, http=HttpConfig(url=url, **http))  # type: ignore[arg-type]
    return ToolInvocation(runtime_id="rt", handle="root", call_id="c1", tool=tool, arguments=arguments)


@pytest.fixture
async def executor() -> AsyncIterator[HttpToolExecutor]:
    ex = HttpToolExecutor(env={"TOKEN": "t0ken"})
    yield ex
    await ex.aclose()


@pytest.fixture
def api(server: ScriptedModelServer) -> str:
    server.route("/api", echo)
    return server.origin + "/api"


async def test_get_fills_placeholders_and_sends_the_rest_as_query(api: str,
                                                                   executor: HttpToolExecutor) -> None:
    """GET quotes placeholders into the path and sends the other arguments as query parameters."""
    result = await executor.invoke(invocation(api + "/users/{user}/items", {"user": "a b/c", "limit": 5,
                                                                          "deep": True}))
    assert result.is_error is False
    assert result.metadata == {"status": 200}
    seen = json.loads(result.output)
    assert seen["method"] == "GET"
    assert seen["path"] == "/api/users/a%20b%2Fc/items"
    assert seen["query"] == {"limit": ["5"], "deep": ["true"]}
    assert seen["body"] is None


async def test_post_splits_query_and_body_and_expands_headers(api: str, executor: HttpToolExecutor) -> None:
    """POST sends http.query arguments as parameters, the rest as JSON, with ${ENV} headers."""
    inv = invocation(api + "/things/{id}", {"id": 7, "limit": 2, "name": "n", "tags": ["a"]},
                     method="POST", query=("limit",), headers={"Authorization": "Bearer ${TOKEN}"})
    seen = json.loads((await executor.invoke(inv)).output)
    assert seen["method"] == "POST"
    assert seen["path"] == "/api/things/7"
    assert seen["query"] == {"limit": ["2"]}
    assert seen["body"] == {"name": "n", "tags": ["a"]}
    assert seen["auth"] == "Bearer t0ken"


async def test_query_in_the_url_is_kept(api: str, executor: HttpToolExecutor) -> None:
    """A query string written into http.url survives alongside argument parameters."""
    seen = json.loads((await executor.invoke(invocation(api + "?v=1", {"q": "x"}))).output)
    assert seen["query"] == {"v": ["1"], "q": ["x"]}


async def test_non_2xx_is_an_error_result(server: ScriptedModelServer, executor: HttpToolExecutor) -> None:
    """A failing status becomes ``HTTP <status>: <body>`` with the status in metadata."""
    server.route("/gone", lambda req: Reply(404, "not here"))
    result = await executor.invoke(invocation(server.origin + "/gone", {}))
    assert (result.output, result.is_error, result.metadata) == ("HTTP 404: not here", True, {"status": 404})


async def test_2xx_body_text_is_the_output(server: ScriptedModelServer, executor: HttpToolExecutor) -> None:
    """A non-JSON success body is returned as text with its status."""
    server.route("/made", lambda req: Reply(201, "created #5"))
    result = await executor.invoke(invocation(server.origin + "/made", {}, method="PUT"))
    assert (result.output, result.is_error, result.metadata) == ("created #5", False, {"status": 201})


async def test_long_output_is_truncated(server: ScriptedModelServer) -> None:
    """A body longer than max_output_chars is cut and says so."""
    server.route("/big", lambda req: Reply(200, "y" * 50))
    ex = HttpToolExecutor(max_output_chars=10)
    result = await ex.invoke(invocation(server.origin + "/big", {}))
    await ex.aclose()
    assert result.output == "y" * 10 + "\n[truncated: 40 more chars]"


async def test_missing_placeholder_argument(api: str, executor: HttpToolExecutor) -> None:
    """A placeholder with no argument fails as a value before any request."""
    result = await executor.invoke(invocation(api + "/{id}", {}))
    assert (result.output, result.is_error) == ('http tool "rest": missing argument "id" for the URL', True)


async def test_unreachable_is_an_error_result(closed_port: int, executor: HttpToolExecutor) -> None:
    """A refused connection becomes an error result naming the tool."""
    result = await executor.invoke(invocation(f"http://127.0.0.1:{closed_port}/x", {}))
    assert result.is_error
    assert result.output.startswith('http tool "rest" unreachable: ConnectError')


async def test_timeout_is_an_error_result(server: ScriptedModelServer, executor: HttpToolExecutor) -> None:
    """A reply slower than http.timeout_ms becomes an error result."""
    server.route("/slow", lambda req: Reply(200, "late", delay=2.0))
    result = await executor.invoke(invocation(server.origin + "/slow", {}, timeout_ms=150))
    assert (result.output, result.is_error) == ('http tool "rest" unreachable: timeout after 150 ms', True)


def test_fill_url_leaves_env_syntax_alone() -> None:
    """``${X}`` is not a placeholder, and used arguments are removed from the rest."""
    assert fill_url("/a/{b}/${C}", {"b": "1", "d": 2}) == ("/a/1/${C}", {"d": 2})


def test_split_arguments_for_get_and_post() -> None:
    """Without a body everything is a parameter; with one only http.query names are, nulls dropped."""
    http = HttpConfig(query=("q",))
    assert split_arguments(http, "GET", {"q": 1, "r": None, "s": "x"}) == ({"q": "1", "s": "x"}, None)
    assert split_arguments(http, "PATCH", {"q": 1, "s": {"k": 1}}) == ({"q": "1"}, {"s": {"k": 1}})
    assert split_arguments(http, "POST", {"q": 1}) == ({"q": "1"}, None)


async def test_issue_scenario_env_header_stays_out_of_logs(server: ScriptedModelServer,
                                                           caplog: pytest.LogCaptureFixture) -> None:
    """A placeholder, a query parameter and an env-expanded header reach the API; no log has the token.

    The echoing endpoint also shows that a token the service sends back is masked in the output.
    """
    server.route("/api", echo)
    server.route("/api/missing", lambda req: Reply(404, "no such city"))
    ex = HttpToolExecutor(env={"WEATHER_TOKEN": "wx-s3cret-token"})
    caplog.set_level(logging.DEBUG)
    headers = {"Authorization": "Bearer ${WEATHER_TOKEN}"}
    args = {"city": "Oslo", "units": "metric"}
    found = await ex.invoke(invocation(server.origin + "/api/cities/{city}", args, query=("units",),
                                       headers=headers))
    missing = await ex.invoke(invocation(server.origin + "/api/missing/{city}", {"city": "Atlantis"},
                                         headers=headers))
    await ex.aclose()
    seen = json.loads(found.output)
    assert (seen["path"], seen["query"], seen["auth"]) == ("/api/cities/Oslo", {"units": ["metric"]},
                                                          "Bearer ***")
    assert (missing.output, missing.is_error, missing.metadata) == ("HTTP 404: no such city", True,
                                                                    {"status": 404})
    assert server.received[0].headers["authorization"] == "Bearer wx-s3cret-token"
    assert caplog.records, "expected httpx to log the requests at DEBUG/INFO"
    assert all("wx-s3cret-token" not in r.getMessage() for r in caplog.records)


async def test_an_echoed_secret_is_masked_in_error_output(server: ScriptedModelServer) -> None:
    """A service echoing the expanded token in an error body does not leak it into the result."""
    server.route("/deny", lambda req: Reply(401, f"bad token {req.headers['x-key']} for user bob"))
    ex = HttpToolExecutor(env={"KEY": "k-123456"})
    result = await ex.invoke(invocation(server.origin + "/deny", {}, headers={"X-Key": "${KEY}"}))
    await ex.aclose()
    assert result.output == "HTTP 401: bad token *** for user bob"
