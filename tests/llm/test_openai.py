"""OpenAITransport against the real scripted server over real HTTP."""

from __future__ import annotations

import httpx
import pytest

from toolnexus_daemon.llm.base import ModelError, ModelRequest
from toolnexus_daemon.llm.openai import OpenAITransport, chat_completions_url
from toolnexus_daemon.model import LlmConfig, Usage
from toolnexus_devtools import Reply, ScriptedModelServer, chat_response, tool_call

from .conftest import RecordingSleep

BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
REQUEST = ModelRequest(runtime_id="rt", handle="root", call_id="c1", body=BODY)


def transport(base_url: str, sleep: RecordingSleep, *, env: dict[str, str] | None = None,
              backoff_base: float = 30.0, rand: float = 1.0, **config: object) -> OpenAITransport:
    return OpenAITransport(LlmConfig(base_url=base_url, model="m", **config),  # type: ignore[arg-type]
                           env=env or {}, backoff_base=backoff_base, backoff_cap=60.0,
                           sleep=sleep, rand=lambda: rand)


async def test_success_sends_body_and_headers_and_parses_the_reply(server: ScriptedModelServer) -> None:
    """The body goes out verbatim with the key and expanded headers; message and usage come back."""
    server.push(chat_response(content="hello", usage=(3, 4, 7)))
    t = transport(server.url, RecordingSleep(), env={"KEY": "sk-test", "TEAM": "blue"},
                  api_key_env="KEY", headers={"X-Team": "team-${TEAM}"})
    reply = await t.complete(REQUEST)
    await t.aclose()
    assert reply.message == {"role": "assistant", "content": "hello"}
    assert reply.usage == Usage(3, 4, 7)
    assert server.requests == [BODY]
    seen = server.received[0]
    assert seen.path == "/v1/chat/completions"
    assert seen.headers["authorization"] == "Bearer sk-test"
    assert seen.headers["x-team"] == "team-blue"


async def test_tool_calls_are_kept_verbatim(server: ScriptedModelServer) -> None:
    """A tool-calling reply keeps its tool_calls list as the model sent it."""
    call = tool_call("lookup", {"q": 1}, id="call_9")
    server.push(chat_response(tool_calls=[call], usage=(1, 1, 2)))
    reply = await transport(server.url, RecordingSleep()).complete(REQUEST)
    assert reply.message["tool_calls"] == [call]


async def test_no_authorization_without_api_key_env(server: ScriptedModelServer) -> None:
    """Without llm.api_key_env no Authorization header is sent."""
    await transport(server.url, RecordingSleep()).complete(REQUEST)
    assert "authorization" not in server.received[0].headers


async def test_503_with_retry_after_zero_is_retried_at_once(server: ScriptedModelServer) -> None:
    """Retry-After: 0 overrides a 30 s backoff window and the second call succeeds."""
    server.push(Reply(503, {"error": "busy"}, {"Retry-After": "0"}), chat_response(content="ok"))
    sleep = RecordingSleep()
    reply = await transport(server.url, sleep).complete(REQUEST)
    assert reply.message["content"] == "ok"
    assert server.calls == 2
    assert sleep.delays == [0.0]


async def test_non_integer_retry_after_falls_back_to_backoff(server: ScriptedModelServer) -> None:
    """A fractional or date Retry-After is ignored in favour of jittered backoff."""
    server.push(Reply(429, "slow down", {"Retry-After": "1.5"}),
                Reply(503, "busy", {"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}),
                chat_response(content="ok"))
    sleep = RecordingSleep()
    await transport(server.url, sleep, backoff_base=0.25, rand=0.5).complete(REQUEST)
    assert sleep.delays == [0.125, 0.25]


async def test_400_fails_at_once(server: ScriptedModelServer) -> None:
    """A non-retryable status is reported after a single call."""
    server.push(Reply(400, {"error": {"message": "bad tools"}}))
    sleep = RecordingSleep()
    with pytest.raises(ModelError, match=r"^model call failed: HTTP 400: .*bad tools"):
        await transport(server.url, sleep, retries=3).complete(REQUEST)
    assert server.calls == 1
    assert sleep.delays == []


async def test_exhausted_retries_say_how_many_attempts() -> None:
    """After the last retry the error names the attempts and the final status and body."""
    srv = ScriptedModelServer(script=lambda body: Reply(503, "overloaded")).start()
    sleep = RecordingSleep()
    try:
        with pytest.raises(ModelError) as err:
            await transport(srv.url, sleep, retries=2, backoff_base=0.01).complete(REQUEST)
        assert str(err.value) == "model call failed after 3 attempts: HTTP 503: overloaded"
        assert srv.calls == 3
        assert len(sleep.delays) == 2
    finally:
        srv.stop()


async def test_negative_retries_mean_one_attempt(server: ScriptedModelServer) -> None:
    """A negative retries setting is clamped to zero retries."""
    server.push(Reply(503, "busy"), chat_response(content="never"))
    with pytest.raises(ModelError, match=r"^model call failed: HTTP 503: busy$"):
        await transport(server.url, RecordingSleep(), retries=-4).complete(REQUEST)
    assert server.calls == 1


async def test_long_error_bodies_are_truncated(server: ScriptedModelServer) -> None:
    """A huge provider error body is cut to a snippet in the message."""
    server.push(Reply(400, "x" * 5000))
    with pytest.raises(ModelError) as err:
        await transport(server.url, RecordingSleep()).complete(REQUEST)
    assert len(str(err.value)) < 600
    assert "5000 chars" in str(err.value)


async def test_connection_refused_is_retried_then_fails(closed_port: int) -> None:
    """A refused connection is retried and then reported as a connection error."""
    sleep = RecordingSleep()
    t = transport(f"http://127.0.0.1:{closed_port}/v1", sleep, retries=2, backoff_base=0.01)
    expected = r"^model call failed after 3 attempts: connection error: ConnectError"
    with pytest.raises(ModelError, match=expected):
        await t.complete(REQUEST)
    assert len(sleep.delays) == 2


async def test_per_call_timeout(server: ScriptedModelServer) -> None:
    """A reply slower than llm.timeout_ms fails the call as a timeout."""
    server.push(Reply(body=chat_response(content="late"), delay=2.0))
    with pytest.raises(ModelError, match=r"^model call failed: timeout after 200 ms"):
        await transport(server.url, RecordingSleep(), retries=0, timeout_ms=200).complete(REQUEST)


async def test_timeout_is_retried(server: ScriptedModelServer) -> None:
    """A timed-out attempt is retried and a prompt second answer wins."""
    # a second of budget: a loaded machine can take a few hundred ms to answer even on loopback
    server.push(Reply(body=chat_response(content="late"), delay=4.0), chat_response(content="fast"))
    reply = await transport(server.url, RecordingSleep(), retries=1, timeout_ms=1000).complete(REQUEST)
    assert reply.message["content"] == "fast"
    assert server.calls == 2


async def test_missing_api_key_names_the_variable(server: ScriptedModelServer) -> None:
    """An unset key variable fails before any HTTP call, naming the variable."""
    t = transport(server.url, RecordingSleep(), env={"OPENAI_API_KEY": ""}, api_key_env="OPENAI_API_KEY")
    with pytest.raises(ModelError) as err:
        await t.complete(REQUEST)
    assert str(err.value) == "environment variable OPENAI_API_KEY (llm.api_key_env) is not set"
    assert server.calls == 0


async def test_secrets_echoed_by_the_provider_are_masked(server: ScriptedModelServer) -> None:
    """Neither the key nor a header value appears in the error, even when the body echoes them."""
    server.push(Reply(401, "invalid key sk-secret-123 for org org-hidden-9"))
    t = transport(server.url, RecordingSleep(), env={"K": "sk-secret-123", "ORG": "org-hidden-9"},
                  api_key_env="K", headers={"OpenAI-Organization": "${ORG}"})
    with pytest.raises(ModelError) as err:
        await t.complete(REQUEST)
    assert "sk-secret-123" not in str(err.value)
    assert "org-hidden-9" not in str(err.value)
    assert str(err.value) == "model call failed: HTTP 401: invalid key *** for org ***"


async def test_non_json_success_body_is_an_error(server: ScriptedModelServer) -> None:
    """A 2xx whose body is not JSON fails without a retry."""
    server.push(Reply(200, "<html>proxy page</html>"))
    with pytest.raises(ModelError, match="not JSON"):
        await transport(server.url, RecordingSleep(), retries=3).complete(REQUEST)
    assert server.calls == 1


async def test_reply_without_choices_is_an_error(server: ScriptedModelServer) -> None:
    """A JSON reply with no choices fails with a message saying so."""
    server.push({"choices": []})
    with pytest.raises(ModelError, match="no choices"):
        await transport(server.url, RecordingSleep()).complete(REQUEST)


async def test_trailing_slash_in_base_url(server: ScriptedModelServer) -> None:
    """A base_url ending in a slash still reaches /chat/completions."""
    await transport(server.url + "/", RecordingSleep()).complete(REQUEST)
    assert server.received[0].path == "/v1/chat/completions"


async def test_an_injected_client_is_left_open(server: ScriptedModelServer) -> None:
    """aclose does not close a client the transport was given."""
    async with httpx.AsyncClient() as client:
        t = OpenAITransport(LlmConfig(base_url=server.url), env={}, client=client)
        await t.complete(REQUEST)
        await t.aclose()
        assert not client.is_closed


@pytest.mark.parametrize(("base", "url"), [
    ("http://h:1/v1", "http://h:1/v1/chat/completions"),
    ("http://h:1/v1/", "http://h:1/v1/chat/completions"),
    ("https://x.example/openai/deployments/d?api-version=2024-06-01",
     "https://x.example/openai/deployments/d/chat/completions?api-version=2024-06-01"),
])
def test_chat_completions_url(base: str, url: str) -> None:
    """The endpoint is base_url plus /chat/completions, with any query string kept last."""
    assert chat_completions_url(base) == url


async def test_the_lower_layer_error_is_chained(closed_port: int) -> None:
    """The ModelError keeps the httpx exception as its cause for tracebacks."""
    t = transport(f"http://127.0.0.1:{closed_port}/v1", RecordingSleep(), retries=0)
    with pytest.raises(ModelError) as err:
        await t.complete(REQUEST)
    assert isinstance(err.value.__cause__, httpx.ConnectError)


async def test_arguments_that_are_not_json_pass_through(server: ScriptedModelServer) -> None:
    """The transport keeps the model's raw argument text; the engine decides what it means."""
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{not json"}}
    server.push(chat_response(tool_calls=[call]))
    reply = await transport(server.url, RecordingSleep()).complete(REQUEST)
    assert reply.message["tool_calls"] == [call]


async def test_content_as_a_list_of_parts_is_kept(server: ScriptedModelServer) -> None:
    """A list of content parts is appended verbatim; the engine joins its text parts."""
    parts = [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]
    server.push({"choices": [{"message": {"content": parts}}]})
    reply = await transport(server.url, RecordingSleep()).complete(REQUEST)
    assert reply.message == {"role": "assistant", "content": parts}


@pytest.mark.parametrize("usage", [None, {}, "n/a", {"prompt_tokens": 4, "completion_tokens": None},
                                   {"prompt_tokens": "4", "completion_tokens": True}])
async def test_missing_or_odd_usage_counts_zero(server: ScriptedModelServer, usage: object) -> None:
    """Absent or malformed usage counts as zero rather than failing the turn; a total is derived."""
    body = {"choices": [{"message": {"role": "assistant", "content": "x"}}]}
    server.push(body if usage is None else {**body, "usage": usage})
    reply = await transport(server.url, RecordingSleep()).complete(REQUEST)
    expected = Usage(4, 0, 4) if isinstance(usage, dict) and usage else Usage(0, 0, 0)
    assert reply.usage == expected


async def test_extra_body_keys_pass_through_untouched(server: ScriptedModelServer) -> None:
    """request_params merged by the engine (tool_choice, temperature, …) reach the server as given."""
    body = {**BODY, "tool_choice": "required", "temperature": 0.1, "response_format": {"type": "json_object"},
            "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}]}
    await transport(server.url, RecordingSleep()).complete(ModelRequest("rt", "root", "c", body))
    assert server.requests == [body]


async def test_anthropic_blocks_are_not_sent(server: ScriptedModelServer) -> None:
    """A transcript written under the anthropic style goes out without its private blocks key."""
    assistant = {"role": "assistant", "content": "hi", "anthropic_content": [{"type": "text", "text": "hi"}]}
    body = {**BODY, "messages": [*BODY["messages"], assistant]}  # type: ignore[list-item]
    await transport(server.url, RecordingSleep()).complete(ModelRequest("rt", "root", "c", body))
    assert server.requests[0]["messages"][-1] == {"role": "assistant", "content": "hi"}
