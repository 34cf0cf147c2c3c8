"""The ``Resolver`` served by the app's ``Connect`` workers that said ``resolver=true``
(docs/protocol.md §6)."""

from __future__ import annotations

from ..model import Answer, Request
from ..relay import NoWorker, ResolutionIn, ResolveOut, WorkerHub


class HubResolver:
    """Sends ``Resolve{request}`` to a resolver worker and reads back its Answer."""

    def __init__(self, hub: WorkerHub) -> None:
        self._hub = hub

    def available(self, runtime_id: str) -> bool:
        return self._hub.has_resolver(runtime_id)

    async def resolve(self, runtime_id: str, handle: str, call_id: str, request: Request,
                      take_timeout_ms: int) -> Answer | None:
        out = ResolveOut(call_id, handle, request)
        try:
            reply = await self._hub.call(runtime_id, out, take_timeout_ms / 1000)
        except NoWorker:
            return None
        if not isinstance(reply, ResolutionIn):  # a reply of another kind answers nothing
            return None
        parsed = reply.answer
        return Answer(request.id, parsed.ok, parsed.data, parsed.reason)
