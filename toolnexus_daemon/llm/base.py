"""The model-transport protocol the engine calls.

The engine speaks one internal message form, OpenAI-shaped chat messages
(docs/protocol.md §4). A transport turns a ``ModelRequest`` into a ``ModelReply`` or
raises ``ModelError`` once its retries are spent; the engine settles the turn
with status ``error`` and the message.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from ..model import JSON, Usage

# where the anthropic transport keeps a reply's content blocks inside the engine's message,
# so that a later request re-sends them verbatim; no other style sends this key
ANTHROPIC_BLOCKS_KEY = "anthropic_content"


@dataclass(frozen=True)
class ModelRequest:
    runtime_id: str
    handle: str
    # unique within the daemon and stable across a re-issue after a crash
    call_id: str
    # the OpenAI chat-completions body: {"model", "messages", "tools"?, "tool_choice"?, **request_params}
    body: JSON
    # style worker: how long to wait for a connected worker to take the call
    take_timeout_ms: int = 30_000
    # streaming transports call this with each text delta as it arrives (live only, never stored)
    on_text: Callable[[str], None] | None = None
    # how a transport waits between attempts; the engine's gives the turn's slot up meanwhile
    sleep: Callable[[float], Awaitable[None]] | None = None
    # the W3C trace context of the call's span, sent as the ``traceparent`` header ("" = none)
    traceparent: str = ""


@dataclass(frozen=True)
class ModelReply:
    # the assistant message, appended verbatim: {"role": "assistant", "content", "tool_calls"?}
    message: JSON
    usage: Usage
    # what the server said it ran and why it stopped, for traces ("" when it did not say)
    model: str = ""
    finish_reason: str = ""


class ModelError(Exception):
    """The model call failed for good; the message is what the turn reports."""


class ModelTransport(Protocol):
    async def complete(self, request: ModelRequest) -> ModelReply: ...

    async def aclose(self) -> None: ...


def reply_from_openai(body: JSON) -> ModelReply:
    """Read an OpenAI chat-completions response body; raise ModelError if it has no message."""
    choices = body.get("choices") if isinstance(body, dict) else None
    if not choices or not isinstance(choices, list) or not isinstance(choices[0], dict):
        raise ModelError(f"model response has no choices: {str(body)[:200]}")
    message = choices[0].get("message")
    if not isinstance(message, dict):
        raise ModelError("model response choice has no message")
    message = dict(message)
    message.setdefault("role", "assistant")
    return ModelReply(message=message, usage=usage_from_openai(body.get("usage")),
                      model=str(body.get("model") or ""),
                      finish_reason=str(choices[0].get("finish_reason") or ""))


def usage_from_openai(usage: object) -> Usage:
    """OpenAI's usage object; a missing or malformed one counts as zero (some servers omit it)."""
    if not isinstance(usage, dict):
        return Usage(0, 0, 0)
    prompt = token_count(usage.get("prompt_tokens"))
    completion = token_count(usage.get("completion_tokens"))
    return Usage(prompt, completion, token_count(usage.get("total_tokens")) or prompt + completion)


def token_count(value: object) -> int:
    """A token count as a non-negative int; anything else is 0 rather than a failed turn."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return 0
    try:
        return max(0, int(value))
    except ValueError:
        return 0
