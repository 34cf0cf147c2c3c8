"""``model_for``: the one place an ``LlmConfig`` style becomes a model transport.

The engine gets this factory from the composition root and builds one
transport per runtime, so it never imports httpx or the worker hub. Adding a
style is one entry in ``_BUILDERS``; a style this build lacks gets a
transport that fails each call with a clear message instead of breaking the
daemon's start (a stored runtime may name it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ..model import LlmConfig, LlmStyle
from ..relay import WorkerHub
from .anthropic import AnthropicTransport
from .base import ModelError, ModelReply, ModelRequest, ModelTransport
from .openai import OpenAITransport
from .worker import WorkerTransport

Builder = Callable[[LlmConfig, WorkerHub, Mapping[str, str] | None], ModelTransport]

_BUILDERS: dict[LlmStyle, Builder] = {
    LlmStyle.OPENAI: lambda llm, hub, env: OpenAITransport(llm, env=env),
    LlmStyle.ANTHROPIC: lambda llm, hub, env: AnthropicTransport(llm, env=env),
    LlmStyle.WORKER: lambda llm, hub, env: WorkerTransport(hub, llm),
}


class UnavailableTransport:
    """Stands in for a style this daemon build cannot serve."""

    def __init__(self, style: str) -> None:
        self._style = style

    async def complete(self, request: ModelRequest) -> ModelReply:
        raise ModelError(f'llm.style "{self._style}" is not available in this daemon build')

    async def aclose(self) -> None:
        pass


def model_for(llm: LlmConfig, *, hub: WorkerHub, env: Mapping[str, str] | None = None) -> ModelTransport:
    """A new transport for ``llm`` reading ``env`` (the allowed view of the environment; None = all of
    it); the caller owns it (and calls ``aclose``)."""
    builder = _BUILDERS.get(llm.style)
    return builder(llm, hub, env) if builder is not None else UnavailableTransport(str(llm.style))


def model_factory(hub: WorkerHub,
                  env: Mapping[str, str] | None = None) -> Callable[[LlmConfig], ModelTransport]:
    """``model_for`` bound to the daemon's worker hub and environment view, as ``Engine`` takes it."""
    return lambda llm: model_for(llm, hub=hub, env=env)
