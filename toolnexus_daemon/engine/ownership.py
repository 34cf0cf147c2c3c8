"""Runtimes owned by one daemon of a cluster: the engine's view of leases.

In a cluster (many daemons on one PostgreSQL database) each runtime has at most one owner.
The engine does not know how ownership is kept — ``cluster.membership`` keeps it with
leases in the database — only what it asks of it (``Ownership``) and what ownership does to
a runtime: its commits are fenced (``LeaseGuard``, the runtime's ``CommitGuard``: its part of
every transaction carries the lease's fence, checked in that transaction), a lost lease makes
the engine forget the runtime, and a call for a runtime owned elsewhere is answered by
``Moved`` naming where it lives, which the API layer turns into a forwarded call.

Outside a cluster there is no ``Ownership`` and every runtime is this daemon's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from ..errors import LeaseLost, StoreError, Unavailable
from ..store.base import Batch, Fence


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


class LeaseGuard:
    """The ``CommitGuard`` of one owned runtime: each of its commits is conditional on its lease.

    ``check`` adds the lease's fence to the runtime's part of every transaction, and the
    store checks it inside that transaction (PostgreSQL's ``tn_fence``), so a commit lands
    only while the lease holds. A transaction shared with other runtimes fails as a whole
    when one fence does; the committer then retries its changes one by one, and only those
    of the runtime that lost its lease are refused. Each such refusal (``LeaseLost``: another
    daemon took the runtime over) calls ``on_lost``, so the engine forgets the runtime."""

    def __init__(self, fence: Fence, on_lost: Callable[[str], None]) -> None:
        self.fence, self._on_lost = fence, on_lost

    def check(self, runtime_id: str, batch: Batch) -> None:
        batch.fences.append(self.fence)

    def refused(self, runtime_id: str, error: StoreError) -> None:
        if isinstance(error, LeaseLost):
            self._on_lost(runtime_id)
