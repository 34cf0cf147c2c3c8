"""The Anthropic Messages transport over httpx (``llm.style = "anthropic"``).

The engine stays provider-neutral: it speaks OpenAI-shaped messages, and
this module translates at the edge, both ways. System messages are hoisted
into ``system``; an assistant message's tool calls become ``tool_use``
blocks; the ``tool`` messages of one step become ONE ``user`` message of
``tool_result`` blocks, as the API requires. A reply's content blocks are
kept verbatim in the message under ``anthropic_content`` and re-sent as they
came: thinking blocks carry signatures the API checks, so rebuilding them
from the OpenAI form would lose them. Retries, timeouts and redaction are
the shared ones (``retry``); streamed events are folded by ``AnthropicStream``.
"""

from __future__ import annotations

import json

import httpx

from ..envexpand import expand_headers
from ..model import JSON, Usage
from .anthropic_stream import AnthropicStream
from .base import ANTHROPIC_BLOCKS_KEY, ModelError, ModelReply, ModelRequest, token_count
from .http_base import HttpTransport
from .retry import Reader, exchange, json_reader, secret_values
from .sse import stream_reader

DEFAULT_BASE_URL = "https://api.anthropic.com"
DEFAULT_MAX_TOKENS = 4096
ANTHROPIC_VERSION = "2023-06-01"
BLOCKS_KEY = ANTHROPIC_BLOCKS_KEY
# body keys this module translates; every other key (request_params) passes through untouched
_TRANSLATED = frozenset({"messages", "tools", "tool_choice"})
_SYSTEM_ROLES = frozenset({"system", "developer"})


class AnthropicTransport(HttpTransport):
    """``ModelTransport`` for servers speaking Anthropic's ``/v1/messages``."""

    default_base_url = DEFAULT_BASE_URL

    @staticmethod
    def endpoint(base_url: str) -> str:
        return messages_url(base_url)

    async def complete(self, request: ModelRequest) -> ModelReply:
        """POST the translated body, retrying transient failures; raise ModelError once they are spent."""
        headers, secrets = self._headers()
        if request.traceparent:
            headers["traceparent"] = request.traceparent
        stream = self._config.stream
        body = anthropic_body(request.body, self._config.max_tokens or DEFAULT_MAX_TOKENS, stream=stream)
        read: Reader = (stream_reader(AnthropicStream, reply_from_anthropic, request.on_text)
                        if stream else json_reader(reply_from_anthropic))
        return await self._policy.run(
            lambda: exchange(self._client, self._url, body, headers, self._timeout_ms, read, stream=stream),
            secrets, budget_ms=self._timeout_ms, sleep=request.sleep)

    def _headers(self) -> tuple[httpx.Headers, list[str]]:
        """The request headers and the secret values among them (to mask in messages)."""
        configured = httpx.Headers(expand_headers(self._config.headers, self._env))
        secrets = secret_values(configured)
        # llm.headers may pin another anthropic-version or add anthropic-beta
        headers = httpx.Headers({"anthropic-version": ANTHROPIC_VERSION})
        headers.update(configured)
        name = self._config.api_key_env
        if name:
            key = self._env.get(name, "")
            if not key:
                raise ModelError(f"environment variable {name} (llm.api_key_env) is not set")
            headers["x-api-key"] = key
            secrets.append(key)
        return headers, secrets


def messages_url(base_url: str) -> str:
    """``{base_url}/v1/messages``, without a second ``/v1`` when the base already ends with it."""
    try:
        url = httpx.URL(base_url)
    except httpx.InvalidURL:
        # reported as a failed call, where the turn can show it, rather than at construction
        base = base_url.rstrip("/")
        return base + ("/messages" if base.endswith("/v1") else "/v1/messages")
    path = url.path.rstrip("/")
    path = path if path.endswith("/v1") else path + "/v1"
    return str(url.copy_with(path=path + "/messages"))


# ------------------------------------------------------------------ request


def anthropic_body(body: JSON, max_tokens: int, *, stream: bool = False) -> JSON:
    """The engine's OpenAI-shaped body as a Messages API body; extras pass through untouched."""
    system, messages = _split_system(body.get("messages") or [])
    out: JSON = {k: v for k, v in body.items() if k not in _TRANSLATED}
    if not out.get("max_tokens"):
        out["max_tokens"] = max_tokens  # a request_params max_tokens already in the body wins
    if system:
        out["system"] = system
    out["messages"] = anthropic_messages(messages)
    tools = body.get("tools") or []
    if tools:
        out["tools"] = [anthropic_tool(t) for t in tools]
        choice = anthropic_tool_choice(body.get("tool_choice"))
        if choice is not None:
            out["tool_choice"] = choice
    if stream:
        out["stream"] = True
    return out


def _split_system(messages: list[JSON]) -> tuple[str, list[JSON]]:
    """System text (every system message, in order) and the remaining messages."""
    system = [text_of(m.get("content")) for m in messages if m.get("role") in _SYSTEM_ROLES]
    rest = [m for m in messages if m.get("role") not in _SYSTEM_ROLES]
    return "\n\n".join(t for t in system if t), rest


def anthropic_messages(messages: list[JSON]) -> list[JSON]:
    """Translate the conversation; consecutive tool messages become one user message of results."""
    out: list[JSON] = []
    results: list[JSON] = []
    for message in messages:
        if message.get("role") == "tool":
            results.append(_tool_result(message))
            continue
        if results:
            out.append({"role": "user", "content": results})
            results = []
        out.append(_assistant(message) if message.get("role") == "assistant" else _user(message))
    if results:
        out.append({"role": "user", "content": results})
    return out


def _user(message: JSON) -> JSON:
    content = message.get("content")
    if isinstance(content, list):
        # OpenAI text parts have Anthropic's text-block shape already; other parts go as given
        return {"role": "user", "content": [_text_block(p) for p in content if isinstance(p, dict)]}
    return {"role": "user", "content": "" if content is None else str(content)}


def _text_block(part: JSON) -> JSON:
    return {"type": "text", "text": str(part.get("text", ""))} if part.get("type") == "text" else part


def _assistant(message: JSON) -> JSON:
    blocks = message.get(BLOCKS_KEY)
    if isinstance(blocks, list):
        return {"role": "assistant", "content": blocks}
    text = text_of(message.get("content"))
    calls = message.get("tool_calls") or []
    if not calls:
        return {"role": "assistant", "content": text}
    content: list[JSON] = [{"type": "text", "text": text}] if text else []
    for call in calls:
        fn = call.get("function") or {}
        content.append({"type": "tool_use", "id": str(call.get("id") or ""),
                        "name": str(fn.get("name") or ""), "input": _arguments(fn.get("arguments"))})
    return {"role": "assistant", "content": content}


def _arguments(raw: object) -> JSON:
    """OpenAI's JSON-encoded arguments as a tool_use input; text that is not an object becomes {}."""
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(str(raw)) if raw else {}
    except (ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def _tool_result(message: JSON) -> JSON:
    return {"type": "tool_result", "tool_use_id": str(message.get("tool_call_id") or ""),
            "content": text_of(message.get("content")), "is_error": bool(message.get("is_error", False))}


def anthropic_tool(tool: JSON) -> JSON:
    """``{"type":"function","function":{...}}`` as ``{name, description, input_schema}``."""
    fn = tool.get("function")
    if not isinstance(fn, dict):
        return tool  # already in Anthropic's shape
    out: JSON = {"name": fn.get("name") or "",
                 "input_schema": fn.get("parameters") or {"type": "object", "properties": {}}}
    if fn.get("description"):
        out["description"] = fn["description"]
    return out


def anthropic_tool_choice(choice: object) -> JSON | None:
    """OpenAI's tool_choice in Anthropic's form; None (not sent) when it has no equivalent."""
    if isinstance(choice, str):
        kind = {"auto": "auto", "required": "any", "any": "any", "none": "none"}.get(choice)
        return {"type": kind} if kind else None
    if not isinstance(choice, dict):
        return None
    if choice.get("type") == "function":
        name = (choice.get("function") or {}).get("name")
        return {"type": "tool", "name": name} if name else None
    return choice if choice.get("type") in ("auto", "any", "tool", "none") else None


def text_of(content: object) -> str:
    """Message content as text: a string, or the text parts of a list joined."""
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


# ------------------------------------------------------------------ reply


def reply_from_anthropic(body: JSON) -> ModelReply:
    """A Messages API response as the engine's assistant message; raise ModelError if it has no content."""
    blocks = body.get("content") if isinstance(body, dict) else None
    if not isinstance(blocks, list):
        raise ModelError(f"model response has no content: {str(body)[:200]}")
    text = "".join(str(b.get("text", "")) for b in blocks if isinstance(b, dict) and b.get("type") == "text")
    calls = [{"id": str(b.get("id") or ""), "type": "function",
              "function": {"name": str(b.get("name") or ""), "arguments": json.dumps(b.get("input") or {})}}
             for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use"]
    message: JSON = {"role": "assistant", "content": text if text or not calls else None}
    if calls:
        message["tool_calls"] = calls
    message[BLOCKS_KEY] = blocks
    return ModelReply(message=message, usage=usage_from_anthropic(body.get("usage")),
                      model=str(body.get("model") or ""), finish_reason=str(body.get("stop_reason") or ""))


def usage_from_anthropic(usage: object) -> Usage:
    """``input_tokens``/``output_tokens`` as prompt/completion, total their sum; missing counts 0."""
    if not isinstance(usage, dict):
        return Usage(0, 0, 0)
    prompt, completion = token_count(usage.get("input_tokens")), token_count(usage.get("output_tokens"))
    return Usage(prompt, completion, prompt + completion)
