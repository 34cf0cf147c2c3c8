"""Executor for ``webhook`` tools: the HTTP twin of a worker (docs/protocol.md §3).

The daemon POSTs ``{"call_id", "runtime_id", "handle", "tool", "arguments",
"answer"}`` and reads back a ToolResult ``{"output", "is_error", "metadata",
"pending"}``, so any web service can serve tools that suspend. ``call_id`` is
stable across redelivery, which lets the service deduplicate. A failure of
the service (unreachable, non-2xx, a malformed reply) becomes an error
result the model reads; this executor never raises for it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import httpx

from ..envexpand import expand_headers
from ..model import JSON, ToolResult
from .base import ToolInvocation
from .http_tool import DEFAULT_MAX_OUTPUT_CHARS, http_error, send, truncate

_SNIPPET_CHARS = 200


def payload(inv: ToolInvocation) -> JSON:
    """The JSON body a webhook receives for one call."""
    return {"call_id": inv.call_id, "action_id": inv.action_id, "runtime_id": inv.runtime_id,
            "handle": inv.handle, "tool": inv.tool.name, "arguments": inv.arguments,
            "answer": inv.answer.to_json() if inv.answer is not None else None}


def result_from_reply(name: str, data: object) -> ToolResult:
    """Read a webhook's ToolResult JSON, or an error result saying what is wrong with it."""
    if not isinstance(data, dict):
        return _bad_reply(name, f"a JSON {type(data).__name__}, not an object")
    pending = data.get("pending")
    if pending is not None and not isinstance(pending, dict):
        return _bad_reply(name, '"pending" that is not an object')
    metadata = data.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        return _bad_reply(name, '"metadata" that is not an object')
    return ToolResult.from_json(data)


def _bad_reply(name: str, what: str) -> ToolResult:
    return ToolResult(output=f'webhook tool "{name}" returned {what}', is_error=True)


class WebhookExecutor:
    """``ToolExecutor`` for source ``webhook``; owns its client unless one is given."""

    def __init__(self, client: httpx.AsyncClient | None = None, env: Mapping[str, str] | None = None,
                 *, max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS) -> None:
        self._owns_client = client is None
        self._client = client if client is not None else httpx.AsyncClient()
        self._env: Mapping[str, str] = os.environ if env is None else env
        self._max_output = max_output_chars

    async def invoke(self, inv: ToolInvocation) -> ToolResult:
        """Deliver the call to the service and read back its ToolResult."""
        http = inv.tool.http
        name = inv.tool.name
        if http is None or not http.url:
            return ToolResult(output=f'webhook tool "{name}" has no http.url', is_error=True)
        try:
            request = self._client.build_request(
                (http.method or "POST").upper(), http.url, json=payload(inv),
                headers=expand_headers(http.headers, self._env))
        except (httpx.InvalidURL, httpx.UnsupportedProtocol) as exc:
            return ToolResult(output=f'webhook tool "{name}": invalid http.url: {exc}', is_error=True)
        response = await send(self._client, "webhook", inv, request)
        if isinstance(response, ToolResult):
            return response
        if not response.is_success:
            return http_error(response.status_code, response.text, self._max_output)
        try:
            data = response.json()
        except RecursionError:
            return _bad_reply(name, "JSON nested too deeply to read")
        except ValueError:
            snippet = truncate(response.text, _SNIPPET_CHARS)
            return _bad_reply(name, f"invalid JSON (HTTP {response.status_code}): {snippet}")
        return result_from_reply(name, data)

    async def aclose(self) -> None:
        """Close the HTTP client if this executor created it."""
        if self._owns_client:
            await self._client.aclose()
