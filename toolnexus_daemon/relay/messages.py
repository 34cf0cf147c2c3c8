"""The typed messages of the relay: what the daemon sends a ``Connect`` worker and what comes back.

Each outgoing call is one dataclass per kind (a tool call, a model call, a
resolve), and so is each reply, so the hub and its users (``tools/native``,
``tools/resolver``, ``llm/worker``) never build or pick apart JSON dicts. The
wire adapter (``api/worker_channel``) is the only place these meet protobuf
(docs/protocol.md §6).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import ClassVar

from ..model import JSON, Answer, Request, ToolResult


class CallKind(StrEnum):
    TOOL = "tool_call"
    LLM = "llm_call"
    RESOLVE = "resolve"


@dataclass(frozen=True)
class ToolCallOut:
    """Run native tool ``tool``; ``answer`` is set when the call resumes a suspended one."""

    kind: ClassVar[CallKind] = CallKind.TOOL
    call_id: str
    handle: str
    tool: str
    arguments: JSON = field(default_factory=dict)
    answer: Answer | None = None
    # the calling handle's registry version; a worker serves it when it names it, or when it names
    # none and this is the runtime's latest
    version: int = 0
    latest: bool = True
    # the W3C trace context of the call's execute_tool span ("" when tracing is off)
    traceparent: str = ""


@dataclass(frozen=True)
class ModelCallOut:
    """One model call: the OpenAI-shaped chat-completions request ``body``."""

    kind: ClassVar[CallKind] = CallKind.LLM
    call_id: str
    handle: str
    body: JSON
    # the W3C trace context of the call's chat span ("" when tracing is off)
    traceparent: str = ""


@dataclass(frozen=True)
class ResolveOut:
    """Ask a resolver worker to answer ``request``."""

    kind: ClassVar[CallKind] = CallKind.RESOLVE
    call_id: str
    handle: str
    request: Request


Outgoing = ToolCallOut | ModelCallOut | ResolveOut


@dataclass(frozen=True)
class ToolOutcomeIn:
    """A worker's ToolOutcome: the tool's result (``pending`` set means it suspends)."""

    call_id: str
    result: ToolResult


@dataclass(frozen=True)
class ModelReplyIn:
    """A worker's LlmReply: an HTTP-like ``status``, the response ``body``, or an ``error``."""

    call_id: str
    status: int = 200
    body: JSON = field(default_factory=dict)
    error: str = ""


@dataclass(frozen=True)
class ResolutionIn:
    """A resolver worker's Answer (its id is the caller's business: it is re-keyed to the request)."""

    call_id: str
    answer: Answer


Incoming = ToolOutcomeIn | ModelReplyIn | ResolutionIn


def refused(kind: CallKind, call_id: str, reason: str, answer_id: str = "") -> Incoming:
    """The reply standing in for one the daemon refused (too deep, NaN, malformed), so its call
    fails with ``reason`` instead of waiting for an answer that will never come."""
    text = f"the worker's reply was refused: {reason}"
    if kind is CallKind.TOOL:
        return ToolOutcomeIn(call_id, ToolResult(output=text, is_error=True))
    if kind is CallKind.LLM:
        return ModelReplyIn(call_id, status=200, body={}, error=text)
    return ResolutionIn(call_id, Answer(id=answer_id, ok=False, reason="declined"))
