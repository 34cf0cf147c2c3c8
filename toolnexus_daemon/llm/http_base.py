"""What every HTTP model transport shares: its client, its retry policy, its endpoint and timeout.

Kept apart so ``openai`` and ``anthropic`` own only what differs (the URL
rule, the headers, the body translation) and the test seams — an injected
client, sleep and randomness — are the same for every style.
"""

from __future__ import annotations

import asyncio
import functools
import os
import random
import ssl
from collections.abc import Awaitable, Callable, Mapping

import httpx

from ..model import LlmConfig
from .retry import RetryPolicy

DEFAULT_TIMEOUT_MS = 60_000


@functools.cache
def shared_ssl_context() -> ssl.SSLContext:
    """The TLS context every model transport's client verifies with, built once per process: building
    one loads the CA bundle (tens of ms on the event loop), which a ``New`` must not pay each time.
    Every transport uses the same (default) verification, so one context serves them all."""
    return httpx.create_ssl_context()


class HttpTransport:
    """The common state of an HTTP ``ModelTransport``; owns its client unless one is given.

    A style sets ``default_base_url`` and ``endpoint`` (base URL → request URL)."""

    default_base_url = ""

    @staticmethod
    def endpoint(base_url: str) -> str:
        return base_url

    def __init__(self, config: LlmConfig, *, env: Mapping[str, str] | None = None,
                 client: httpx.AsyncClient | None = None, backoff_base: float = 0.5,
                 backoff_cap: float = 8.0, sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
                 rand: Callable[[], float] = random.random) -> None:
        self._config = config
        self._env: Mapping[str, str] = os.environ if env is None else env
        self._url = self.endpoint(config.base_url or self.default_base_url)
        self._timeout_ms = config.timeout_ms if config.timeout_ms > 0 else DEFAULT_TIMEOUT_MS
        self._owns_client = client is None
        self._client = client if client is not None else httpx.AsyncClient(verify=shared_ssl_context())
        self._policy = RetryPolicy(config.retries, backoff_base, backoff_cap, sleep, rand)

    async def aclose(self) -> None:
        """Close the HTTP client if this transport created it."""
        if self._owns_client:
            await self._client.aclose()
