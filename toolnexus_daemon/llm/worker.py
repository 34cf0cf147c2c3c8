"""The ``worker`` model transport: each model call is relayed to the app over ``Connect``.

This is how in-process models and the reference mock transport plug in
(docs/protocol.md §3): the daemon sends the OpenAI-shaped request body as an
``LlmCall`` through the worker hub and reads the worker's ``LlmReply``
(``{"status", "body", "error"}``) back as a chat-completions response.

A reply is final: retrying the provider behind it is the worker's business, and a
failed reply settles the turn with ``error``. A *missing* reply is the daemon's: the
worker holding the call gets ``llm.timeout_ms`` to answer, then the call is sent again
— with the same ``call_id``, since it is the same call — preferably to another
connected worker, under the retry rules of the HTTP styles (``llm.retries``, backoff,
``retry``). When they are spent the turn fails with the timeout, as for the other styles.
"""

from __future__ import annotations

import json

from ..model import LlmConfig
from ..relay import ModelCallOut, ModelReplyIn, NoReply, NoWorker, WorkerHub, WorkerSession
from .base import ModelReply, ModelRequest, reply_from_openai
from .http_base import DEFAULT_TIMEOUT_MS
from .retry import Failure, RetryPolicy, parse_reply

_SNIPPET_CHARS = 300


class WorkerTransport:
    """``ModelTransport`` for style ``worker``; holds no resources of its own."""

    def __init__(self, hub: WorkerHub, config: LlmConfig | None = None, *,
                 policy: RetryPolicy | None = None) -> None:
        config = config or LlmConfig()
        self._hub = hub
        self._timeout_ms = config.timeout_ms if config.timeout_ms > 0 else DEFAULT_TIMEOUT_MS
        self._policy = policy or RetryPolicy(config.retries)

    async def complete(self, request: ModelRequest) -> ModelReply:
        """Relay one model call to a worker with ``llm=true`` and read its reply; a worker silent
        for ``llm.timeout_ms`` is passed over and the call re-sent, as a retry."""
        silent: set[WorkerSession] = set()

        async def attempt() -> ModelReply | Failure:
            return await self._attempt(request, silent)

        return await self._policy.run(attempt, (), budget_ms=self._timeout_ms, sleep=request.sleep)

    async def _attempt(self, request: ModelRequest, silent: set[WorkerSession]) -> ModelReply | Failure:
        out = ModelCallOut(request.call_id, request.handle, request.body, request.traceparent)
        try:
            reply = await self._hub.call(request.runtime_id, out, request.take_timeout_ms / 1000,
                                         reply_timeout=self._timeout_ms / 1000, avoid=frozenset(silent))
        except NoWorker:
            return Failure(f"no worker with llm=true is connected to serve model calls "
                           f"(waited {request.take_timeout_ms} ms); connect one with Connect",
                           retryable=False)
        except NoReply as exc:
            silent.add(exc.session)
            return Failure(f'timeout after {self._timeout_ms} ms (no reply from worker '
                           f'"{exc.session.worker_id}")', retryable=True)
        if not isinstance(reply, ModelReplyIn):
            # a reply of another kind has no body: read as an empty 200, which names the missing choices
            reply = ModelReplyIn(reply.call_id)
        if reply.error:
            return Failure(f"the worker replied with an error: {reply.error}", retryable=False)
        if reply.status >= 400:
            return Failure(f"the worker replied HTTP {reply.status}: {_snippet(reply.body)}", retryable=False)
        return parse_reply(reply.body, reply_from_openai)

    async def aclose(self) -> None:
        """Nothing to release: the hub outlives every runtime."""


def _snippet(body: object) -> str:
    text = json.dumps(body, default=str)
    return text if len(text) <= _SNIPPET_CHARS else text[:_SNIPPET_CHARS] + "…"
