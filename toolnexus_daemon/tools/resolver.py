"""The ``Resolver`` served by the app's ``Connect`` workers that said ``resolver=true``
(docs/protocol.md §6)."""

from __future__ import annotations

from ..model import Answer, Request
from ..workers import CallKind, NoWorker, Outgoing, WorkerHub


class HubResolver:
    """Sends ``Resolve{request}`` to a resolver worker and reads back its Answer."""

    def __init__(self, hub: WorkerHub) -> None:
        self._hub = hub

    def available(self, runtime_id: str) -> bool:
        return self._hub.has_resolver(runtime_id)

    async def resolve(self, runtime_id: str, handle: str, call_id: str, request: Request,
                      take_timeout_ms: int) -> Answer | None:
        out = Outgoing(CallKind.RESOLVE, call_id, handle, {"request": request.to_json()})
        try:
            reply = await self._hub.call(runtime_id, out, take_timeout_ms / 1000)
        except NoWorker:
            return None
        answer = reply.get("answer")
        if not isinstance(answer, dict):
            return None
        parsed = Answer.from_json(answer)
        return Answer(request.id, parsed.ok, parsed.data, parsed.reason)
