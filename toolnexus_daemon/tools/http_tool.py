"""Executor for ``http`` tools: a plain REST endpoint called with the tool's arguments.

docs/protocol.md §3: ``{placeholder}`` segments of ``http.url`` are filled from the
arguments (URL-quoted) and those arguments are used up; arguments named in
``http.query`` go as query parameters; the rest go as a JSON body for methods
that carry one, else as query parameters. Header values get ``${ENV}``
expansion; the expanded values are never logged and are masked in the
output, which is stored in the event log and read by the model. Every request
carries ``Idempotency-Key: <call_id>`` (unless the tool's headers set one), the
same across a re-dispatch of the same call (docs/protocol.md §11). Also home
of the helpers the webhook executor shares: both turn every httpx failure
into an error ToolResult, because a tool's failure is a value the model
reads, not a crash.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import httpx

from ..envexpand import expand_headers, expanded_secrets, mask
from ..model import JSON, HttpConfig, OnCrash, ToolResult
from .base import OutcomeUnknown, ToolInvocation

DEFAULT_TIMEOUT_MS = 30_000
# a tool result is fed to the model; an unbounded body would blow its context
DEFAULT_MAX_OUTPUT_CHARS = 100_000
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
# ``{name}`` but not ``${name}``, which is environment syntax and left alone
_PLACEHOLDER = re.compile(r"(?<!\$)\{([A-Za-z_][A-Za-z0-9_]*)\}")


def timeout_ms(http: HttpConfig) -> int:
    """The configured per-call timeout, or the default when unset."""
    return http.timeout_ms if http.timeout_ms > 0 else DEFAULT_TIMEOUT_MS


def truncate(text: str, limit: int) -> str:
    """Cut ``text`` to ``limit`` chars, saying how much was dropped."""
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[truncated: {len(text) - limit} more chars]"


def http_error(status: int, body: str, limit: int) -> ToolResult:
    """The pinned error result for a non-2xx reply: ``HTTP <status>: <body>``."""
    return ToolResult(output=f"HTTP {status}: {truncate(body, limit)}", is_error=True,
                      metadata={"status": status})


def unreachable(kind: str, name: str, exc: Exception, limit_ms: int) -> ToolResult:
    """An error result for a call that got no HTTP response at all."""
    if isinstance(exc, httpx.TimeoutException | TimeoutError):
        reason = f"timeout after {limit_ms} ms"
    else:
        text = str(exc)
        reason = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return ToolResult(output=f'{kind} tool "{name}" unreachable: {reason}', is_error=True)


# failures that prove the request never reached the service: nothing can have happened
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout, httpx.UnsupportedProtocol,
             httpx.LocalProtocolError, httpx.InvalidURL)


async def send(client: httpx.AsyncClient, kind: str, inv: ToolInvocation, request: httpx.Request,
               ) -> httpx.Response | ToolResult:
    """Send one request under the tool's timeout; a failure comes back as an error result —
    for an ``on_crash: "ask"`` tool whose request may have arrived (the connection broke or
    timed out after it was sent), ``OutcomeUnknown`` instead (docs/protocol.md §11)."""
    http = inv.tool.http or HttpConfig()
    limit = timeout_ms(http)
    request.extensions["timeout"] = httpx.Timeout(limit / 1000).as_dict()
    request.headers.setdefault("Idempotency-Key", inv.call_id)
    if inv.traceparent:
        request.headers["traceparent"] = inv.traceparent
    try:
        # httpx times each read separately; the outer deadline bounds a slow trickle too
        async with asyncio.timeout(limit / 1000):
            return await client.send(request)
    except (httpx.RequestError, TimeoutError) as exc:
        if inv.tool.on_crash is OnCrash.ASK and not isinstance(exc, _NOT_SENT):
            raise OutcomeUnknown(unreachable(kind, inv.tool.name, exc, limit).output) from exc
        return unreachable(kind, inv.tool.name, exc, limit)


def query_value(value: Any) -> str:
    """A JSON argument as text for a URL: JSON spelling for bools/null/objects, bare strings."""
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"))


def fill_url(template: str, args: JSON) -> tuple[str, JSON]:
    """Substitute ``{name}`` placeholders; returns the URL and the arguments not used.

    Raises KeyError naming the first placeholder with no argument.
    """
    rest = dict(args)
    for name in _PLACEHOLDER.findall(template):
        if name not in args:
            raise KeyError(name)
        rest.pop(name, None)
    url = _PLACEHOLDER.sub(lambda m: quote(query_value(args[m.group(1)]), safe=""), template)
    return url, rest


def split_arguments(http: HttpConfig, method: str, rest: JSON) -> tuple[dict[str, str], JSON | None]:
    """Divide the unused arguments into query parameters and a JSON body (None = no body)."""
    params = {k: query_value(v) for k, v in rest.items() if k in http.query and v is not None}
    remaining = {k: v for k, v in rest.items() if k not in http.query}
    if method in BODY_METHODS:
        return params, remaining or None
    params.update({k: query_value(v) for k, v in remaining.items() if v is not None})
    return params, None


class HttpToolExecutor:
    """``ToolExecutor`` for source ``http``; owns its client unless one is given."""

    def __init__(self, client: httpx.AsyncClient | None = None, env: Mapping[str, str] | None = None,
                 *, max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS) -> None:
        self._owns_client = client is None
        self._client = client if client is not None else httpx.AsyncClient()
        self._env: Mapping[str, str] = os.environ if env is None else env
        self._max_output = max_output_chars

    async def invoke(self, inv: ToolInvocation) -> ToolResult:
        """Call the endpoint; every failure is an error result."""
        http = inv.tool.http
        if http is None or not http.url:
            return ToolResult(output=f'http tool "{inv.tool.name}" has no http.url', is_error=True)
        args = inv.arguments if isinstance(inv.arguments, dict) else {}
        try:
            request = self._build(http, args)
        except KeyError as exc:
            return ToolResult(output=f'http tool "{inv.tool.name}": missing argument "{exc.args[0]}" '
                              "for the URL", is_error=True)
        except (httpx.InvalidURL, httpx.UnsupportedProtocol) as exc:
            return ToolResult(output=f'http tool "{inv.tool.name}": invalid http.url: {exc}', is_error=True)
        response = await send(self._client, "http", inv, request)
        if isinstance(response, ToolResult):
            return response
        # the output is stored and shown to the model: an echoed ${ENV} header value must not leak
        text = mask(response.text, expanded_secrets(http.headers, self._env))
        if not response.is_success:
            return http_error(response.status_code, text, self._max_output)
        return ToolResult(output=truncate(text, self._max_output), metadata={"status": response.status_code})

    async def aclose(self) -> None:
        """Close the HTTP client if this executor created it."""
        if self._owns_client:
            await self._client.aclose()

    def _build(self, http: HttpConfig, args: JSON) -> httpx.Request:
        method = (http.method or "GET").upper()
        url, rest = fill_url(http.url, args)
        params, body = split_arguments(http, method, rest)
        # httpx's params= replaces a query written into http.url; merging keeps both
        target = httpx.URL(url).copy_merge_params(params) if params else httpx.URL(url)
        return self._client.build_request(method, target, json=body,
                                          headers=expand_headers(http.headers, self._env))
