"""The ``worker`` model transport: each model call is relayed to the app over ``Connect``.

This is how in-process models and the reference mock transport plug in
(docs/protocol.md §3): the daemon sends the OpenAI-shaped request body as an
``LlmCall`` through the worker hub and reads the worker's ``LlmReply``
(``{"status", "body", "error"}``) back as a chat-completions response. Retries
are the worker's business; a failed reply settles the turn with ``error``.
"""

from __future__ import annotations

import json

from ..workers import CallKind, NoWorker, Outgoing, WorkerHub
from .base import ModelError, ModelReply, ModelRequest, reply_from_openai

_SNIPPET_CHARS = 300


class WorkerTransport:
    """``ModelTransport`` for style ``worker``; holds no resources of its own."""

    def __init__(self, hub: WorkerHub) -> None:
        self._hub = hub

    async def complete(self, request: ModelRequest) -> ModelReply:
        """Relay one model call to a worker with ``llm=true`` and read its reply."""
        out = Outgoing(CallKind.LLM, request.call_id, request.handle, {"body": request.body})
        try:
            reply = await self._hub.call(request.runtime_id, out, request.take_timeout_ms / 1000)
        except NoWorker:
            raise ModelError(f"no worker with llm=true is connected to serve model calls "
                             f"(waited {request.take_timeout_ms} ms); connect one with Connect") from None
        error = str(reply.get("error") or "")
        status = int(reply.get("status") or 200)
        body = reply.get("body") or {}
        if error:
            raise ModelError(f"worker model call failed: {error}")
        if status >= 400:
            raise ModelError(f"worker model call failed: HTTP {status}: {_snippet(body)}")
        return reply_from_openai(body)

    async def aclose(self) -> None:
        """Nothing to release: the hub outlives every runtime."""


def _snippet(body: object) -> str:
    text = json.dumps(body, default=str)
    return text if len(text) <= _SNIPPET_CHARS else text[:_SNIPPET_CHARS] + "…"
