"""``model_for``: the one place an ``LlmConfig`` style becomes a model transport.

The engine gets this factory from the composition root and builds one
transport per runtime, so it never imports httpx or the worker hub. Adding a
style is one entry in ``_BUILDERS``; a style this build lacks gets a
transport that fails each call with a clear message instead of breaking the
daemon's start (a stored runtime may name it).
"""

from __future__ import annotations

from collections.abc import Callable

from ..model import LlmConfig, LlmStyle
from ..workers import WorkerHub
from .anthropic import AnthropicTransport
from .base import ModelError, ModelReply, ModelRequest, ModelTransport
from .openai import OpenAITransport
from .worker import WorkerTransport

Builder = Callable[[LlmConfig, WorkerHub], ModelTransport]

_BUILDERS: dict[LlmStyle, Builder] = {
    LlmStyle.OPENAI: lambda llm, hub: OpenAITransport(llm),
    LlmStyle.ANTHROPIC: lambda llm, hub: AnthropicTransport(llm),
    LlmStyle.WORKER: lambda llm, hub: WorkerTransport(hub),
}


class UnavailableTransport:
    """Stands in for a style this daemon build cannot serve."""

    def __init__(self, style: str) -> None:
        self._style = style

    async def complete(self, request: ModelRequest) -> ModelReply:
        raise ModelError(f'llm.style "{self._style}" is not available in this daemon build')

    async def aclose(self) -> None:
        pass


def model_for(llm: LlmConfig, *, hub: WorkerHub) -> ModelTransport:
    """A new transport for ``llm``; the caller owns it (and calls ``aclose``)."""
    builder = _BUILDERS.get(llm.style)
    return builder(llm, hub) if builder is not None else UnavailableTransport(str(llm.style))


def model_factory(hub: WorkerHub) -> Callable[[LlmConfig], ModelTransport]:
    """``model_for`` bound to the daemon's worker hub, in the shape ``Engine`` takes."""
    return lambda llm: model_for(llm, hub=hub)
