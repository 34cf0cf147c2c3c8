"""The OpenAI-compatible chat-completions transport over httpx.

Owns one concern: turning a ``ModelRequest`` into one HTTP exchange with
retries, and every lower-layer failure (httpx exceptions, HTTP statuses,
malformed bodies) into a ``ModelError`` whose message the turn can report.
The message never carries the API key or a header value: provider error
bodies sometimes echo the key back, so known secrets are masked as well.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

import httpx

from ..model import JSON, LlmConfig
from ..tools.envexpand import expand_headers
from .base import ModelError, ModelReply, ModelRequest, reply_from_openai
from .retry import is_retryable_status, retry_delay, total_attempts

log = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_TIMEOUT_MS = 60_000
# enough of a provider's error body to diagnose, not enough to flood a result
BODY_SNIPPET_CHARS = 500
# shorter values (e.g. "1", "json") are too common to mask without mangling the message
_MIN_SECRET_CHARS = 6


@dataclass(frozen=True)
class _Failure:
    """One failed attempt: what to report and whether another attempt may help."""

    reason: str
    retryable: bool
    retry_after: str | None = None
    # the lower-layer exception, chained onto the ModelError for tracebacks
    cause: Exception | None = None


class OpenAITransport:
    """``ModelTransport`` for any server speaking OpenAI's ``/chat/completions``."""

    def __init__(self, config: LlmConfig, *, env: Mapping[str, str] | None = None,
                 client: httpx.AsyncClient | None = None, backoff_base: float = 0.5,
                 backoff_cap: float = 8.0, sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
                 rand: Callable[[], float] = random.random) -> None:
        self._config = config
        self._env: Mapping[str, str] = os.environ if env is None else env
        self._url = chat_completions_url(config.base_url or DEFAULT_BASE_URL)
        self._timeout_ms = config.timeout_ms if config.timeout_ms > 0 else DEFAULT_TIMEOUT_MS
        self._owns_client = client is None
        self._client = client if client is not None else httpx.AsyncClient()
        self._backoff_base = backoff_base
        self._backoff_cap = backoff_cap
        self._sleep = sleep
        self._rand = rand

    async def complete(self, request: ModelRequest) -> ModelReply:
        """POST the body, retrying transient failures; raise ModelError once they are spent."""
        headers, secrets = self._headers()
        attempts = total_attempts(self._config.retries)
        for attempt in range(attempts):
            outcome = await self._attempt(request.body, headers)
            if isinstance(outcome, ModelReply):
                return outcome
            if not outcome.retryable or attempt + 1 == attempts:
                message = _redact(_failure_message(outcome.reason, attempt + 1), secrets)
                raise ModelError(message) from outcome.cause
            delay = retry_delay(attempt, outcome.retry_after, base=self._backoff_base,
                                cap=self._backoff_cap, rand=self._rand)
            log.info("model call attempt %d/%d failed (%s); retrying in %.2fs", attempt + 1, attempts,
                     _redact(outcome.reason, secrets), delay)
            await self._sleep(delay)
        raise AssertionError("unreachable: the last attempt always returns or raises")

    async def aclose(self) -> None:
        """Close the HTTP client if this transport created it."""
        if self._owns_client:
            await self._client.aclose()

    def _headers(self) -> tuple[httpx.Headers, list[str]]:
        """The request headers and the secret values in them (to mask in messages)."""
        headers = httpx.Headers(expand_headers(self._config.headers, self._env))
        secrets = [v for v in headers.values() if len(v) >= _MIN_SECRET_CHARS]
        name = self._config.api_key_env
        if name:
            key = self._env.get(name, "")
            if not key:
                raise ModelError(f"environment variable {name} (llm.api_key_env) is not set")
            # the dedicated key setting wins over an Authorization in llm.headers
            headers["Authorization"] = f"Bearer {key}"
            secrets.append(key)
        return headers, secrets

    async def _attempt(self, body: JSON, headers: httpx.Headers) -> ModelReply | _Failure:
        """One HTTP exchange, its failure described rather than raised."""
        seconds = self._timeout_ms / 1000
        try:
            # httpx times each read separately; the outer deadline bounds a slow trickle too
            async with asyncio.timeout(seconds):
                response = await self._client.post(self._url, json=body, headers=headers, timeout=seconds)
        except (httpx.TimeoutException, TimeoutError) as exc:
            return _Failure(f"timeout after {self._timeout_ms} ms ({type(exc).__name__})", retryable=True,
                            cause=exc)
        except (httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
            return _Failure(f"invalid llm.base_url: {exc}", retryable=False, cause=exc)
        except httpx.TransportError as exc:
            return _Failure(f"connection error: {_describe(exc)}", retryable=True, cause=exc)
        except httpx.RequestError as exc:
            # e.g. a body that fails to decode: the same bytes would come back again
            return _Failure(f"bad response: {_describe(exc)}", retryable=False, cause=exc)
        return _read(response)


def chat_completions_url(base_url: str) -> str:
    """``{base_url}/chat/completions``, keeping a query string (e.g. Azure's api-version) at the end."""
    try:
        url = httpx.URL(base_url)
    except httpx.InvalidURL:
        # reported as a failed call, where the turn can show it, rather than at construction
        return f"{base_url.rstrip('/')}/chat/completions"
    return str(url.copy_with(path=url.path.rstrip("/") + "/chat/completions"))


def _read(response: httpx.Response) -> ModelReply | _Failure:
    """Interpret one HTTP response: a reply, or a failure saying whether to retry."""
    if not response.is_success:
        return _Failure(f"HTTP {response.status_code}: {_snippet(response.text)}",
                        retryable=is_retryable_status(response.status_code),
                        retry_after=response.headers.get("retry-after"))
    try:
        data = response.json()
    except ValueError as exc:
        return _Failure(f"HTTP {response.status_code} response is not JSON: {_snippet(response.text)}",
                        retryable=False, cause=exc)
    try:
        return reply_from_openai(data)
    except ModelError as exc:
        return _Failure(str(exc), retryable=False, cause=exc)


def _failure_message(reason: str, attempts_made: int) -> str:
    if attempts_made == 1:
        return f"model call failed: {reason}"
    return f"model call failed after {attempts_made} attempts: {reason}"


def _describe(exc: Exception) -> str:
    """The exception class and message; httpx messages name neither headers nor keys."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _snippet(text: str) -> str:
    text = text.strip()
    if len(text) <= BODY_SNIPPET_CHARS:
        return text
    return text[:BODY_SNIPPET_CHARS] + f"… ({len(text)} chars)"


def _redact(text: str, secrets: list[str]) -> str:
    for secret in secrets:
        text = text.replace(secret, "***")
    return text
