"""Every HTTP model transport verifies TLS with one context built once per process: building one
loads the CA bundle (tens of ms on the event loop), which a ``New`` must not pay each time."""

from __future__ import annotations

import ssl
from typing import Any

from toolnexus_daemon.llm.anthropic import AnthropicTransport
from toolnexus_daemon.llm.openai import OpenAITransport
from toolnexus_daemon.model import LlmConfig


def _context_of(transport: Any) -> ssl.SSLContext:
    return transport._client._transport._pool._ssl_context  # type: ignore[no-any-return]


async def test_transports_share_one_tls_context_and_keep_their_own_clients() -> None:
    made = [OpenAITransport(LlmConfig(style="openai", model="m")) for _ in range(2)]
    made.append(AnthropicTransport(LlmConfig(style="anthropic", model="m")))
    try:
        contexts = {id(_context_of(t)) for t in made}
        assert len(contexts) == 1, "each transport built a TLS context of its own"
        assert len({id(t._client) for t in made}) == 3, "connection pools stay per transport"
        assert _context_of(made[0]).verify_mode == ssl.CERT_REQUIRED
    finally:
        for t in made:
            await t.aclose()
