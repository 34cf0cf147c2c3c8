"""The request index: the one owner of "a request became pending, answered or cancelled".

Per runtime and request id it records the leaf handles that wait on the request and, for each,
whether it is still pending, was answered (with the answer, and the top of the cascade that
answer reached, so a repeated answer can report what the first did) or was cancelled. ``suspend``
opens waits, ``resume`` answers them, ``ending`` cancels them — all through this module, so the
states are an enum and the stored shape is built and read in one place.

A request id is single-use within a runtime (docs/protocol.md §4): once any wait on it is
settled, a new suspension under the same id gets a daemon-made ``<id>~<12 hex>``.
"""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING

from ...model import JSON, Answer, Request
from .handle import storable_id
from .held import HeldRecords
from .request_entry import RequestEntry, Wait, WaitState

__all__ = ["RequestEntry", "RequestIndex", "Wait", "WaitState"]

if TYPE_CHECKING:
    from ...store.base import Store
    from .change import Change


class RequestIndex:
    """A runtime's view of the index: reads see what a change already wrote, writes go into it."""

    def __init__(self, store: Store, runtime_id: str, held: HeldRecords | None = None) -> None:
        self._store = store
        self._rid = runtime_id
        # entries as this owner last committed them: read without the store (``state.held``)
        self._held = held if held is not None else HeldRecords(runtime_id)
        # entries ``fetch`` read off the event loop, each for the one ``get`` that follows it
        self._fetched: dict[str, JSON | None] = {}

    async def fetch(self, request_id: str) -> RequestEntry | None:
        """Read ``request_id``'s entry through ``Store.read`` (off the event loop) for the next
        ``get`` of it, which then waits on no store. Call it right before that ``get``, with
        nothing awaited between (the entry is what the store held when it was read). Returns
        the entry read (a copy: what ``get`` returns is its own)."""
        self._fetched.clear()  # one left by a call that failed before its get is stale now
        if not storable_id(request_id):
            return None
        rec = self._held.request(request_id)
        if rec is None:
            rid = self._rid
            rec = await self._store.read(lambda s: s.get_request(rid, request_id))
        self._fetched[request_id] = rec
        return RequestEntry.from_json(rec) if rec else None

    def unfetch(self) -> None:
        """Forget what ``fetch`` read when its ``get`` will not come (the state moved on while it
        read): a later ``get`` reads the store, never an entry that may be stale by then."""
        self._fetched.clear()

    def get(self, request_id: str, change: Change | None = None) -> RequestEntry | None:
        if change is not None and request_id in change.requests:
            return change.requests[request_id]
        if not storable_id(request_id):
            return None
        if request_id in self._fetched:
            rec = self._fetched.pop(request_id)
        else:
            rec = self._held.request(request_id)
            if rec is None:
                rec = self._store.get_request(self._rid, request_id)
        return RequestEntry.from_json(rec) if rec else None

    def open(self, request: Request, handle: str) -> tuple[Request, RequestEntry]:
        """The request as it will be announced, and its entry with ``handle`` waiting on it.

        An id still pending elsewhere (several handles asked the same question at once) is shared;
        a settled one is never reused, so replaying its answer cannot approve this new request."""
        existing = self.get(request.id)
        if existing is None:
            return request, RequestEntry.opened(request, handle)
        if existing.settled():
            fresh = _renamed(request, unique_request_id(request.id))
            return fresh, RequestEntry.opened(fresh, handle)
        existing.request = request.to_json()
        existing.waits[handle] = Wait(WaitState.PENDING)
        return request, existing

    def answer(self, change: Change, request_id: str, entry: RequestEntry, handle: str, answer: Answer,
               top: str, *, expired: bool = False) -> None:
        entry.waits[handle] = Wait(WaitState.EXPIRED if expired else WaitState.ANSWERED, answer, top)
        change.requests[request_id] = entry

    def cancel(self, change: Change, request_id: str, handle: str) -> None:
        entry = self.get(request_id, change)
        if entry is None or handle not in entry.waits:
            return
        entry.waits[handle] = Wait(WaitState.CANCELLED)
        change.requests[request_id] = entry


def _renamed(request: Request, request_id: str) -> Request:
    return Request(request_id, request.kind, request.prompt, request.url, request.data, request.expires_at)


def unique_request_id(used: str) -> str:
    """``<used>~<12 hex>``, the used id shortened if needed so the result stays storable."""
    suffix = "~" + secrets.token_hex(6)
    base = used
    while not storable_id(base + suffix):
        base = base[:-1]
    return base + suffix
