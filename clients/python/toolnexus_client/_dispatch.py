"""What user code may return to a worker call, and what it becomes (no I/O here).

The coercion of a tool's return value into a ``ToolResult`` and of a model
transport's reply into ``(status, body)``, and the types of the callables a
blocking client serves (``Transport``, ``Resolver``). The dispatcher that runs
the calls is the asyncio core's (``toolnexus_client.aio._dispatch``), for both
clients: a blocking client's plain functions run in its loop's thread pool.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from ._types import JSON, Answer, Request, ToolResult

Transport = Callable[[JSON], Mapping[str, Any]]
"""A model transport: ``transport({"body": request})`` → ``{"status", "headers", "body"}``; the
request also has ``"traceparent"`` (the call's W3C trace context) when the daemon traces."""

Resolver = Callable[[Request], "Answer | Mapping[str, Any]"]
"""Answers a ``wait_for`` suspension inline: ``wait_for(request)`` → Answer (or its dict)."""

RESULT_KEYS = frozenset({"output", "is_error", "metadata", "pending"})


def to_tool_result(value: Any) -> ToolResult:
    """Coerce what a tool returned: str → ok output, ToolResult as is, a dict of ToolResult keys
    (``output``/``is_error``/``metadata``/``pending``) as a ToolResult, None → empty output,
    anything else → its JSON text as output."""
    if isinstance(value, ToolResult):
        return value
    if isinstance(value, str):
        return ToolResult.ok(value)
    if value is None:
        return ToolResult.ok("")
    if isinstance(value, Mapping) and value and set(value) <= RESULT_KEYS:
        pending = value.get("pending")
        return ToolResult(output=str(value.get("output") or ""), is_error=bool(value.get("is_error")),
                          metadata=dict(value["metadata"]) if value.get("metadata") else None,
                          pending=Request.of(pending) if pending else None)
    return ToolResult.ok(json.dumps(value, default=str))


def reply_parts(reply: Mapping[str, Any]) -> tuple[int, JSON]:
    """``(status, body)`` of a transport reply; a bare chat-completion dict counts as a 200 body."""
    if "body" not in reply:
        return 200, dict(reply)
    status = int(reply.get("status") or 200)
    body = reply["body"]
    if isinstance(body, bytes | bytearray):
        body = body.decode("utf-8", "replace")
    if isinstance(body, str):
        try:
            body = json.loads(body) if body.strip() else {}
        except ValueError:
            body = {"error": {"message": body}}
    if not isinstance(body, Mapping):
        raise TypeError(f"model reply body is {type(body).__name__}, not a JSON object")
    return status, dict(body)
