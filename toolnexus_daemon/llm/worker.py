"""The ``worker`` model transport: each model call is relayed to the app over ``Connect``.

This is how in-process models and the reference mock transport plug in
(docs/protocol.md §3): the daemon sends the OpenAI-shaped request body as an
``LlmCall`` through the worker hub and reads the worker's ``LlmReply``
(``{"status", "body", "error"}``) back as a chat-completions response. Retries
are the worker's business; a failed reply settles the turn with ``error``.
"""

from __future__ import annotations

import json

from ..relay import ModelCallOut, ModelReplyIn, NoWorker, WorkerHub
from .base import ModelError, ModelReply, ModelRequest, reply_from_openai

_SNIPPET_CHARS = 300


class WorkerTransport:
    """``ModelTransport`` for style ``worker``; holds no resources of its own."""

    def __init__(self, hub: WorkerHub) -> None:
        self._hub = hub

    async def complete(self, request: ModelRequest) -> ModelReply:
        """Relay one model call to a worker with ``llm=true`` and read its reply."""
        out = ModelCallOut(request.call_id, request.handle, request.body)
        try:
            reply = await self._hub.call(request.runtime_id, out, request.take_timeout_ms / 1000)
        except NoWorker:
            raise ModelError(f"no worker with llm=true is connected to serve model calls "
                             f"(waited {request.take_timeout_ms} ms); connect one with Connect") from None
        if not isinstance(reply, ModelReplyIn):
            # a reply of another kind has no body: read as an empty 200, which names the missing choices
            reply = ModelReplyIn(reply.call_id)
        if reply.error:
            raise ModelError(f"worker model call failed: {reply.error}")
        if reply.status >= 400:
            raise ModelError(f"worker model call failed: HTTP {reply.status}: {_snippet(reply.body)}")
        return reply_from_openai(reply.body)

    async def aclose(self) -> None:
        """Nothing to release: the hub outlives every runtime."""


def _snippet(body: object) -> str:
    text = json.dumps(body, default=str)
    return text if len(text) <= _SNIPPET_CHARS else text[:_SNIPPET_CHARS] + "…"
