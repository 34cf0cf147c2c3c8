"""Scripted event streams, the /v1/messages route and the Anthropic-style mock model."""

from __future__ import annotations

import httpx
import pytest

from toolnexus_daemon.llm.anthropic import AnthropicTransport
from toolnexus_daemon.llm.base import ModelRequest
from toolnexus_daemon.llm.openai import OpenAITransport
from toolnexus_daemon.model import JSON, LlmConfig
from toolnexus_devtools import (
    ScriptedModelServer,
    Stream,
    anthropic_response,
    chat_response,
    mock_anthropic_model,
    mock_model,
    tool_use,
)
from toolnexus_devtools.model_streams import encode_event, words

TOOLS = [{"name": "first", "input_schema": {}}, {"name": "second", "input_schema": {}}]


def test_encode_event_forms() -> None:
    """Text, JSON, named and multi-line events and comments in the wire format."""
    assert encode_event("[DONE]") == b"data: [DONE]\n\n"
    assert encode_event({"a": 1}) == b'data: {"a": 1}\n\n'
    assert encode_event(("ping", "x\ny")) == b"event: ping\ndata: x\ndata: y\n\n"
    assert encode_event(": keep-alive") == b": keep-alive\n\n"


@pytest.mark.parametrize("text", ["", "one", "  lead and  trail  ", "a\nb"])
def test_words_concatenate_back_to_the_text(text: str) -> None:
    """Word deltas lose no whitespace."""
    assert "".join(words(text)) == text


def test_a_stream_reply_is_sent_as_event_stream(server: ScriptedModelServer) -> None:
    """A pushed Stream is served as text/event-stream with its extra headers, events in order."""
    server.push(Stream([("ping", {"n": 1}), "[DONE]"], headers={"X-Req": "7"}))
    with httpx.stream("POST", server.url + "/chat/completions", json={"messages": []}) as reply:
        assert reply.headers["content-type"] == "text/event-stream"
        assert reply.headers["x-req"] == "7"
        body = reply.read()
    assert body == b'event: ping\ndata: {"n": 1}\n\ndata: [DONE]\n\n'


def test_a_cut_stream_breaks_the_transfer(server: ScriptedModelServer) -> None:
    """cut=True ends the connection before the promised body, which the client sees as an error."""
    server.push(Stream(["partial"], cut=True))
    with pytest.raises(httpx.RemoteProtocolError):
        httpx.post(server.url + "/chat/completions", json={"messages": []})


def test_json_answers_are_streamed_when_asked(server: ScriptedModelServer) -> None:
    """A plain JSON script answer to a stream request goes out as the provider's event stream."""
    server.push(chat_response("hi there"))
    with httpx.stream("POST", server.url + "/chat/completions", json={"stream": True}) as reply:
        lines = [line for line in reply.iter_lines() if line]
    assert lines[-1] == "data: [DONE]"
    assert any('"content": "there"' in line for line in lines)


def test_messages_route_shares_the_queue_and_the_record(server: ScriptedModelServer) -> None:
    """/v1/messages takes pushed replies first, then the Anthropic mock; bodies are recorded."""
    server.push(anthropic_response("pushed"))
    first = httpx.post(server.url + "/messages", json={"messages": []}).json()
    second = httpx.post(server.url + "/messages", json={"messages": [], "stream": True})
    assert first["content"] == [{"type": "text", "text": "pushed"}]
    assert second.headers["content-type"] == "text/event-stream"
    assert "event: message_stop" in second.text
    assert server.calls == 2
    assert server.requests[1] == {"messages": [], "stream": True}


def test_a_custom_anthropic_script() -> None:
    """anthropic_script answers /v1/messages when the queue is empty."""
    with ScriptedModelServer(anthropic_script=lambda body: anthropic_response(str(len(body)))) as srv:
        assert httpx.post(srv.url + "/messages", json={"a": 1}).json()["content"][0]["text"] == "1"


def test_mock_anthropic_model_tells_the_mock_model_story() -> None:
    """Call the first tool, then answer with the first tool result; "ok" without tools."""
    called = mock_anthropic_model({"messages": [{"role": "user", "content": "go"}], "tools": TOOLS})
    assert called["content"] == [tool_use("first", {})]
    result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "42"},
                                          {"type": "tool_result", "tool_use_id": "u", "content": "43"}]}
    answered = mock_anthropic_model({"messages": [result], "tools": TOOLS})
    assert answered["content"] == [{"type": "text", "text": "42"}]
    assert mock_anthropic_model({"messages": []})["content"] == [{"type": "text", "text": "ok"}]


@pytest.mark.parametrize("stream", [False, True])
async def test_both_styles_tell_the_same_story(server: ScriptedModelServer, stream: bool) -> None:
    """Through the real transports the two mocks give the same texts and usage, streamed or not."""
    stories = []
    for cls in (OpenAITransport, AnthropicTransport):
        model = cls(LlmConfig(base_url=server.url, model="m", stream=stream), env={})
        messages: list[JSON] = [{"role": "user", "content": "go"}]
        body: JSON = {"model": "m", "messages": messages,
                      "tools": [{"type": "function", "function": {"name": "approval", "parameters": {}}}]}
        first = await model.complete(ModelRequest("rt", "root", "m1", body))
        messages += [first.message, {"role": "tool", "tool_call_id": first.message["tool_calls"][0]["id"],
                                     "content": "approved"}]
        second = await model.complete(ModelRequest("rt", "root", "m2", body))
        await model.aclose()
        stories.append((first.message["tool_calls"][0]["function"], first.usage, second.message["content"],
                        second.usage))
    assert stories[0] == stories[1]
    assert stories[0][2] == "approved"
    assert mock_model(body)["usage"]["total_tokens"] == stories[0][3].total_tokens
