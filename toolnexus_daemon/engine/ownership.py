"""Runtimes owned by one daemon of a cluster: the engine's view of leases.

In a cluster (many daemons on one PostgreSQL database) each runtime has at most one owner.
The engine does not know how ownership is kept — ``cluster.membership`` keeps it with
leases in the database — only what it asks of it (``Ownership``) and what ownership does to
a runtime: its commits are fenced (``FencedStore``: every batch carries the lease's fence,
checked in the commit's own transaction), a lost lease makes the engine forget the runtime,
and a call for a runtime owned elsewhere is answered by ``Moved`` naming where it lives, which
the API layer turns into a forwarded call.

Outside a cluster there is no ``Ownership`` and every runtime is this daemon's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Protocol

from ..errors import LeaseLost, Unavailable
from ..model import JSON, Event
from ..store.base import Batch, Fence, HandleCensus, HandleKey, PendingQuery, PendingRow, Store, StoreInfo


class Moved(Unavailable):
    """The runtime is owned by another live daemon of the cluster, reachable at ``address``."""

    def __init__(self, runtime_id: str, owner: str, address: str) -> None:
        super().__init__(f'runtime "{runtime_id}" is served by daemon {owner} at {address}; '
                         "this daemon could not forward the call there, retry")
        self.runtime_id, self.owner, self.address = runtime_id, owner, address


@dataclass(frozen=True)
class Owned:
    """This daemon owns the runtime; its commits carry ``fence``."""

    fence: Fence


@dataclass(frozen=True)
class Elsewhere:
    owner: str
    address: str


Claim = Owned | Elsewhere


class Ownership(Protocol):
    """What the engine asks of a cluster membership."""

    async def claim(self, runtime_id: str) -> Claim:
        """Own ``runtime_id`` (take it when nobody live holds it), or learn who does."""
        ...

    async def release(self, runtime_id: str) -> None:
        """Give the runtime up now (a graceful stop): another daemon may take it at once."""
        ...


class FencedStore:
    """The store as one owned runtime sees it: every commit is conditional on its lease.

    A commit refused by its fence (``LeaseLost``: another daemon took the runtime over)
    calls ``on_lost`` once, so the engine forgets the runtime; nothing of the commit landed.
    Reads go straight to the shared store."""

    def __init__(self, store: Store, fence: Fence, on_lost: Callable[[str], None]) -> None:
        self._store, self.fence, self._on_lost = store, fence, on_lost

    async def commit(self, batch: Batch) -> None:
        try:
            await self._store.commit(replace(batch, fences=[*batch.fences, self.fence]))
        except LeaseLost:
            self._on_lost(self.fence.runtime_id)
            raise

    def runtime_ids(self) -> list[str]:
        return self._store.runtime_ids()

    def get_runtime(self, runtime_id: str) -> JSON | None:
        return self._store.get_runtime(runtime_id)

    def handles(self, runtime_id: str) -> list[JSON]:
        return self._store.handles(runtime_id)

    def handles_to_recover(self, runtime_id: str) -> list[str]:
        return self._store.handles_to_recover(runtime_id)

    def census(self, runtime_id: str) -> HandleCensus:
        return self._store.census(runtime_id)

    def pending(self, query: PendingQuery) -> list[PendingRow]:
        return self._store.pending(query)
    def expiring(self, runtime_id: str, limit: int) -> list[tuple[float, str]]:
        return self._store.expiring(runtime_id, limit)

    def get_handle(self, runtime_id: str, handle_id: str) -> JSON | None:
        return self._store.get_handle(runtime_id, handle_id)

    def get_handles(self, keys: list[HandleKey]) -> list[JSON | None]:
        return self._store.get_handles(keys)

    def messages(self, runtime_id: str, handle_id: str, start: int = 0, end: int | None = None) -> list[JSON]:
        return self._store.messages(runtime_id, handle_id, start, end)

    def get_checkpoint(self, runtime_id: str, handle_id: str) -> JSON | None:
        return self._store.get_checkpoint(runtime_id, handle_id)

    def get_request(self, runtime_id: str, request_id: str) -> JSON | None:
        return self._store.get_request(runtime_id, request_id)

    def events(self, runtime_id: str, after_seq: int = 0, limit: int = 1000) -> list[Event]:
        return self._store.events(runtime_id, after_seq, limit)

    def last_seq(self, runtime_id: str) -> int:
        return self._store.last_seq(runtime_id)

    def info(self) -> StoreInfo:
        return self._store.info()

    def close(self) -> None:
        """The shared store is closed by its owner (the composition root), not per runtime."""
