"""AnthropicTransport against the real scripted server's /v1/messages over real HTTP."""

from __future__ import annotations

import pytest

from toolnexus_daemon.llm.anthropic import AnthropicTransport, anthropic_tool_choice, messages_url
from toolnexus_daemon.llm.base import ModelError, ModelRequest
from toolnexus_daemon.model import JSON, LlmConfig, Usage
from toolnexus_devtools import Reply, ScriptedModelServer, anthropic_response, tool_use

from .conftest import RecordingSleep

TOOLS = [{"type": "function", "function": {"name": "lookup", "description": "Find a thing.",
                                           "parameters": {"type": "object", "properties": {"q": {}}}}},
         {"type": "function", "function": {"name": "bare", "parameters": {}}}]
MESSAGES = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "hi"}]


def request(messages: list[JSON] = MESSAGES, **extra: object) -> ModelRequest:
    return ModelRequest(runtime_id="rt", handle="root", call_id="c1",
                        body={"model": "claude-x", "messages": messages, **extra})


def transport(base_url: str, sleep: RecordingSleep, *, env: dict[str, str] | None = None,
              **config: object) -> AnthropicTransport:
    return AnthropicTransport(LlmConfig(base_url=base_url, model="claude-x", **config),  # type: ignore[arg-type]
                              env=env or {}, backoff_base=30.0, backoff_cap=60.0, sleep=sleep,
                              rand=lambda: 1.0)


async def test_request_headers_and_body_field_by_field(server: ScriptedModelServer,
                                                       sleep: RecordingSleep) -> None:
    """Key, version and expanded headers go out; the system prompt is hoisted, tools reshaped."""
    t = transport(server.url, sleep, env={"AK": "sk-ant-secret", "B": "beta-1"}, api_key_env="AK",
                  headers={"anthropic-beta": "${B}"})
    await t.complete(request(tools=TOOLS, tool_choice="required", temperature=0.2, top_k=5))
    await t.aclose()
    seen = server.received[0]
    assert seen.path == "/v1/messages"
    assert (seen.headers["x-api-key"], seen.headers["anthropic-version"]) == ("sk-ant-secret", "2023-06-01")
    assert seen.headers["anthropic-beta"] == "beta-1"
    assert "authorization" not in seen.headers
    assert server.requests == [{
        "model": "claude-x", "temperature": 0.2, "top_k": 5, "max_tokens": 4096, "system": "You are terse.",
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"name": "lookup", "description": "Find a thing.",
                   "input_schema": {"type": "object", "properties": {"q": {}}}},
                  {"name": "bare", "input_schema": {"type": "object", "properties": {}}}],
        "tool_choice": {"type": "any"}}]


async def test_max_tokens_from_config_and_from_the_body(server: ScriptedModelServer,
                                                        sleep: RecordingSleep) -> None:
    """llm.max_tokens replaces the default; a max_tokens already in the body (request_params) wins."""
    t = transport(server.url, sleep, max_tokens=123)
    await t.complete(request())
    await t.complete(request(max_tokens=7))
    assert [b["max_tokens"] for b in server.requests] == [123, 7]


async def test_without_tools_neither_tools_nor_tool_choice_go_out(server: ScriptedModelServer,
                                                                  sleep: RecordingSleep) -> None:
    """No system message means no system field; a tool_choice without tools is dropped."""
    await transport(server.url, sleep).complete(request([{"role": "user", "content": "x"}],
                                                        tool_choice="auto"))
    assert server.requests[0] == {"model": "claude-x", "max_tokens": 4096,
                                  "messages": [{"role": "user", "content": "x"}]}


async def test_a_step_round_trips_with_blocks_verbatim(server: ScriptedModelServer,
                                                       sleep: RecordingSleep) -> None:
    """Tool uses come back OpenAI-shaped; the next request re-sends the blocks and groups the results."""
    blocks = [{"type": "thinking", "thinking": "hmm", "signature": "sig=="},
              {"type": "text", "text": "Let me "}, {"type": "text", "text": "look."},
              tool_use("lookup", {"q": "a"}, "toolu_a"), tool_use("lookup", {"q": "b"}, "toolu_b")]
    server.push({**anthropic_response(usage=(11, 4)), "content": blocks, "stop_reason": "tool_use"},
                anthropic_response("done", usage=(20, 2)))
    t = transport(server.url, sleep)
    first = await t.complete(request(tools=TOOLS))
    assert first.message == {
        "role": "assistant", "content": "Let me look.", "anthropic_content": blocks,
        "tool_calls": [
            {"id": "toolu_a", "type": "function", "function": {"name": "lookup", "arguments": '{"q": "a"}'}},
            {"id": "toolu_b", "type": "function", "function": {"name": "lookup", "arguments": '{"q": "b"}'}}]}
    assert first.usage == Usage(11, 4, 15)
    results = [{"role": "tool", "tool_call_id": "toolu_a", "content": "A"},
               {"role": "tool", "tool_call_id": "toolu_b", "content": "B"}]
    second = await t.complete(request([*MESSAGES, first.message, *results], tools=TOOLS))
    assert (second.message["content"], second.usage) == ("done", Usage(20, 2, 22))
    assert server.requests[1]["messages"] == [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": blocks},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_a", "content": "A", "is_error": False},
            {"type": "tool_result", "tool_use_id": "toolu_b", "content": "B", "is_error": False}]}]


async def test_openai_shaped_history_is_translated(server: ScriptedModelServer,
                                                   sleep: RecordingSleep) -> None:
    """An assistant message without stored blocks becomes text + tool_use blocks; bad arguments are {}."""
    history: list[JSON] = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "ok", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": '{"q": 1}'}},
            {"id": "c2", "type": "function", "function": {"name": "bare", "arguments": "{oops"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "one"},
        {"role": "tool", "tool_call_id": "c2", "content": "two"},
        {"role": "assistant", "content": [{"type": "text", "text": "fine"}]},
        {"role": "user", "content": [{"type": "text", "text": "more"}]}]
    await transport(server.url, sleep).complete(request(history))
    assert server.requests[0]["messages"] == [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [
            {"type": "text", "text": "ok"},
            {"type": "tool_use", "id": "c1", "name": "lookup", "input": {"q": 1}},
            {"type": "tool_use", "id": "c2", "name": "bare", "input": {}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "c1", "content": "one", "is_error": False},
            {"type": "tool_result", "tool_use_id": "c2", "content": "two", "is_error": False}]},
        {"role": "assistant", "content": "fine"},
        {"role": "user", "content": [{"type": "text", "text": "more"}]}]


@pytest.mark.parametrize(("choice", "expected"), [
    ("auto", {"type": "auto"}), ("required", {"type": "any"}), ("none", {"type": "none"}),
    ({"type": "function", "function": {"name": "lookup"}}, {"type": "tool", "name": "lookup"}),
    ({"type": "tool", "name": "x"}, {"type": "tool", "name": "x"}), ("weird", None), (3, None),
])
def test_tool_choice_translation(choice: object, expected: JSON | None) -> None:
    """OpenAI tool_choice forms map to Anthropic's; forms without an equivalent are not sent."""
    assert anthropic_tool_choice(choice) == expected


async def test_missing_usage_counts_zero(server: ScriptedModelServer, sleep: RecordingSleep) -> None:
    """A reply without usage is not an error; it costs nothing."""
    server.push({"type": "message", "content": [{"type": "text", "text": "hi"}]})
    reply = await transport(server.url, sleep).complete(request())
    assert reply.usage == Usage(0, 0, 0)


async def test_reply_without_content_is_an_error(server: ScriptedModelServer, sleep: RecordingSleep) -> None:
    """A JSON reply with no content list fails at once, saying so."""
    server.push({"type": "message"})
    with pytest.raises(ModelError, match="^model call failed: model response has no content"):
        await transport(server.url, sleep, retries=3).complete(request())
    assert server.calls == 1


async def test_503_then_success(server: ScriptedModelServer, sleep: RecordingSleep) -> None:
    """A transient status is retried after the jittered backoff."""
    server.push(Reply(503, "busy"), anthropic_response("ok"))
    reply = await transport(server.url, sleep).complete(request())
    assert (reply.message["content"], server.calls, sleep.delays) == ("ok", 2, [30.0])


async def test_429_retry_after_zero_and_529_overloaded(server: ScriptedModelServer,
                                                       sleep: RecordingSleep) -> None:
    """Retry-After: 0 is honoured; Anthropic's 529 overloaded is retried like a 503."""
    server.push(Reply(429, "slow", {"Retry-After": "0"}), Reply(529, {"type": "error"}, {"Retry-After": "0"}),
                anthropic_response("ok"))
    reply = await transport(server.url, sleep).complete(request())
    assert (reply.message["content"], server.calls, sleep.delays) == ("ok", 3, [0.0, 0.0])


async def test_400_fails_at_once_without_the_key(server: ScriptedModelServer, sleep: RecordingSleep) -> None:
    """A bad request is not retried, and a key the provider echoes is masked."""
    server.push(Reply(400, {"type": "error", "error": {"message": "bad key sk-ant-secret"}}))
    t = transport(server.url, sleep, retries=3, env={"AK": "sk-ant-secret"}, api_key_env="AK")
    with pytest.raises(ModelError) as err:
        await t.complete(request())
    assert str(err.value).startswith("model call failed: HTTP 400: ")
    assert "bad key ***" in str(err.value)
    assert "sk-ant-secret" not in str(err.value)
    assert (server.calls, sleep.delays) == (1, [])


async def test_missing_api_key_names_the_variable(server: ScriptedModelServer, sleep: RecordingSleep) -> None:
    """An unset key variable fails before any HTTP call."""
    with pytest.raises(ModelError, match="^environment variable AK \\(llm.api_key_env\\) is not set$"):
        await transport(server.url, sleep, api_key_env="AK").complete(request())
    assert server.calls == 0


@pytest.mark.parametrize("suffix", ["", "/", "/v1", "/v1/"])
async def test_base_url_with_and_without_v1(server: ScriptedModelServer, sleep: RecordingSleep,
                                            suffix: str) -> None:
    """The call reaches /v1/messages whether or not the base already ends in /v1."""
    await transport(server.origin + suffix, sleep).complete(request())
    assert server.received[0].path == "/v1/messages"


@pytest.mark.parametrize(("base", "url"), [
    ("https://api.anthropic.com", "https://api.anthropic.com/v1/messages"),
    ("https://gw.example/anthropic/v1?key=1", "https://gw.example/anthropic/v1/messages?key=1"),
    ("https://gw.example/anthropic", "https://gw.example/anthropic/v1/messages"),
])
def test_messages_url(base: str, url: str) -> None:
    """A path prefix and a query string are kept."""
    assert messages_url(base) == url
