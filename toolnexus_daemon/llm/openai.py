"""The OpenAI-compatible chat-completions transport over httpx.

Owns what is OpenAI-specific: the endpoint, the ``Authorization`` header,
and folding a streamed reply (``choices[].delta`` chunks, tool calls
assembled by index, usage in the last chunk) back into the body a
non-streamed call returns. Retries, timeouts and the translation of
lower-layer failures into a ``ModelError`` are shared with the other HTTP
styles (``retry``); the message never carries the API key or a header value.
"""

from __future__ import annotations

import httpx

from ..envexpand import expand_headers
from ..model import JSON
from .base import ANTHROPIC_BLOCKS_KEY, ModelError, ModelReply, ModelRequest, reply_from_openai
from .http_base import HttpTransport
from .retry import Reader, exchange, json_reader, secret_values
from .sse import SseEvent, StreamError, event_json, stream_reader

DEFAULT_BASE_URL = "https://api.openai.com/v1"


class OpenAITransport(HttpTransport):
    """``ModelTransport`` for any server speaking OpenAI's ``/chat/completions``."""

    default_base_url = DEFAULT_BASE_URL

    @staticmethod
    def endpoint(base_url: str) -> str:
        return chat_completions_url(base_url)

    async def complete(self, request: ModelRequest) -> ModelReply:
        """POST the body, retrying transient failures; raise ModelError once they are spent."""
        headers = self._headers()
        secrets = secret_values(headers)
        if request.traceparent:
            headers["traceparent"] = request.traceparent
        body = outgoing_body(request.body)
        body = streaming_body(body) if self._config.stream else body
        read: Reader = (stream_reader(OpenAIStream, reply_from_openai, request.on_text)
                        if self._config.stream else json_reader(reply_from_openai))
        return await self._policy.run(
            lambda: exchange(self._client, self._url, body, headers, self._timeout_ms, read,
                             stream=self._config.stream),
            secrets, budget_ms=self._timeout_ms, sleep=request.sleep)

    def _headers(self) -> httpx.Headers:
        """The request headers; every value in them is treated as a secret in messages."""
        headers = httpx.Headers(expand_headers(self._config.headers, self._env))
        name = self._config.api_key_env
        if name:
            key = self._env.get(name, "")
            if not key:
                raise ModelError(f"environment variable {name} (llm.api_key_env) is not set")
            # the dedicated key setting wins over an Authorization in llm.headers
            headers["Authorization"] = f"Bearer {key}"
        return headers


def chat_completions_url(base_url: str) -> str:
    """``{base_url}/chat/completions``, keeping a query string (e.g. Azure's api-version) at the end."""
    try:
        url = httpx.URL(base_url)
    except httpx.InvalidURL:
        # reported as a failed call, where the turn can show it, rather than at construction
        return f"{base_url.rstrip('/')}/chat/completions"
    return str(url.copy_with(path=url.path.rstrip("/") + "/chat/completions"))


def outgoing_body(body: JSON) -> JSON:
    """The body as every OpenAI-compatible server accepts it.

    What the anthropic style keeps in messages is dropped (a runtime reattached with another
    ``llm`` keeps its transcript, and strict servers refuse fields they do not know). An assistant
    message with tool calls goes out with ``"content": ""`` instead of ``null`` and without the
    legacy ``function_call`` beside ``tool_calls``: servers such as llama-cpp-python refuse both
    (HTTP 500 on the call after the first tool result). Everything else stays verbatim.
    """
    messages = body.get("messages")
    if not isinstance(messages, list):
        return body
    return {**body, "messages": [_outgoing_message(m) for m in messages]}


def _outgoing_message(message: object) -> object:
    if not isinstance(message, dict):
        return message
    out = {k: v for k, v in message.items() if k != ANTHROPIC_BLOCKS_KEY}
    if out.get("role") == "assistant" and out.get("tool_calls"):
        out.pop("function_call", None)
        if out.get("content") is None:
            out["content"] = ""
    return out


def streaming_body(body: JSON) -> JSON:
    """The body asking for a stream whose last chunk carries the usage."""
    options = body.get("stream_options")
    options = dict(options) if isinstance(options, dict) else {}
    options["include_usage"] = True
    return {**body, "stream": True, "stream_options": options}


class OpenAIStream:
    """Assembles ``chat.completion.chunk`` events into a ``chat.completion`` body (choice 0 only)."""

    def __init__(self) -> None:
        self._text: list[str] = []
        self._calls: dict[int, JSON] = {}
        self._usage: JSON = {}
        self._finish: str | None = None
        self._model = ""
        self._done = False

    @property
    def done(self) -> bool:
        return self._done

    @property
    def complete(self) -> bool:
        # some compatible servers end without [DONE]; a finish_reason already says the answer ended
        return self._done or self._finish is not None

    def feed(self, event: SseEvent) -> str:
        if event.data.strip() == "[DONE]":
            self._done = True
            return ""
        chunk = event_json(event)
        if chunk.get("error"):
            raise StreamError(str(chunk["error"])[:500])
        self._model = self._model or str(chunk.get("model") or "")
        if isinstance(chunk.get("usage"), dict):
            self._usage = chunk["usage"]
        text = ""
        for choice in chunk.get("choices") or []:
            if isinstance(choice, dict) and choice.get("index", 0) == 0:
                text += self._take(choice.get("delta") or {})
                self._finish = choice.get("finish_reason") or self._finish
        return text

    def _take(self, delta: JSON) -> str:
        """Fold one delta in; returns its text."""
        for piece in delta.get("tool_calls") or []:
            self._take_call(piece)
        content = delta.get("content")
        if isinstance(content, str) and content:
            self._text.append(content)
            return content
        return ""

    def _take_call(self, piece: JSON) -> None:
        """Tool calls arrive in pieces keyed by index: id and name once, arguments in fragments."""
        index = piece.get("index")
        if not isinstance(index, int):
            # a server that omits the index sends one call at a time: a new id opens the next one
            last = max(self._calls, default=-1)
            index = last + 1 if piece.get("id") and self._calls.get(last, {}).get("id") else max(last, 0)
        call = self._calls.setdefault(index, {"id": "", "type": "function",
                                              "function": {"name": "", "arguments": ""}})
        call["id"] = piece.get("id") or call["id"]
        fn = piece.get("function") or {}
        name = fn.get("name") or ""
        if name != call["function"]["name"]:  # some servers repeat the whole name in every piece
            call["function"]["name"] += name
        call["function"]["arguments"] += fn.get("arguments") or ""

    def body(self) -> JSON:
        # "" rather than null beside tool calls: what every compatible server accepts back
        text = "".join(self._text)
        message: JSON = {"role": "assistant", "content": text if text or self._calls else None}
        if self._calls:
            message["tool_calls"] = [self._calls[i] for i in sorted(self._calls)]
        return {"object": "chat.completion", "usage": self._usage, "model": self._model,
                "choices": [{"index": 0, "message": message, "finish_reason": self._finish}]}
