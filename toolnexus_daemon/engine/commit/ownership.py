"""Runtimes owned by one daemon of a cluster: the engine's view of leases.

In a cluster (many daemons on one PostgreSQL database) each runtime has at most one owner.
The engine does not know how ownership is kept — ``cluster.membership`` keeps it with
leases in the database — only what it asks of it (``Ownership``) and what ownership does to
a runtime: its commits are fenced (``LeaseGuard``, the runtime's ``CommitGuard``: its part of
every transaction carries the lease's fence, checked in that transaction), a lost lease makes
the engine forget the runtime, and a call for a runtime owned elsewhere is answered by
``Moved`` naming where it lives, which the API layer turns into a forwarded call.

Ownership belongs to one process, and that process fences itself on its own clock: a lease
it could not renew in time is no longer *fresh* (``Ownership.fresh``), and then the engine
serves no read of the runtime, starts no model or tool call and commits nothing for it — it
gives the runtime up (``LeaseGuard.act`` before every model and tool call, ``check`` before
every commit, ``Engine.open`` before every call), exactly as if another daemon had taken it.

Outside a cluster there is no ``Ownership`` and every runtime is this daemon's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from ...errors import LeaseLost, StoreError, Unavailable
from ...store.base import Batch, Fence


class Moved(Unavailable):
    """The runtime is owned by another live daemon of the cluster, reachable at ``address`` ("" when
    that daemon cannot be forwarded to: it has no address other daemons can dial)."""

    def __init__(self, runtime_id: str, owner: str, address: str, expires_at: float = 0.0) -> None:
        if address:
            text = (f'runtime "{runtime_id}" is served by daemon {owner} at {address}; '
                    "this daemon could not forward the call there, retry")
        else:
            text = (f'runtime "{runtime_id}" is served by daemon {owner}, which other daemons cannot '
                    "forward calls to (it was started without --advertise and listens on no fixed "
                    "address); send the call to that daemon, or retry: once its lease lapses any "
                    "daemon takes the runtime over")
        super().__init__(text)
        self.runtime_id, self.owner, self.address = runtime_id, owner, address
        # when the owner's lease runs out unless renewed (time.monotonic(), as the membership reads it);
        # 0 = unknown
        self.expires_at = expires_at


@dataclass(frozen=True)
class Owned:
    """This daemon owns the runtime; its commits carry ``fence``."""

    fence: Fence


@dataclass(frozen=True)
class Elsewhere:
    owner: str
    address: str
    # when its lease runs out unless renewed (time.monotonic()); 0 = unknown
    expires_at: float = 0.0


Claim = Owned | Elsewhere


class Ownership(Protocol):
    """What the engine asks of a cluster membership."""

    async def claim(self, runtime_id: str) -> Claim:
        """Own ``runtime_id`` (take it when nobody live holds it), or learn who does."""
        ...

    async def release(self, runtime_id: str) -> None:
        """Give the runtime up now (a graceful stop): another daemon may take it at once."""
        ...

    def fresh(self, fence: Fence) -> bool:
        """Whether this process may still act for ``fence``'s tenure (its lease renewed in time)."""
        ...

    def give_up(self, runtime_id: str) -> None:
        """Stop holding ``runtime_id`` (its lease went stale here): renew it no more."""
        ...


class Stale(asyncio.CancelledError):
    """Raised in a turn about to act for a runtime whose lease is no longer fresh here: the runtime
    is given up and the turn ends as a stopped one does (its state untouched, the next owner's)."""


class LeaseGuard:
    """The ``CommitGuard`` of one owned runtime: each of its commits is conditional on its lease.

    ``check`` adds the lease's fence to the runtime's part of every transaction, and the
    store checks it inside that transaction (PostgreSQL's ``tn_fence``), so a commit lands
    only while the lease holds. A transaction shared with other runtimes fails as a whole
    when one fence does; the committer then retries its changes one by one, and only those
    of the runtime that lost its lease are refused. Each such refusal (``LeaseLost``: another
    daemon took the runtime over) calls ``on_lost``, so the engine forgets the runtime."""

    def __init__(self, fence: Fence, on_lost: Callable[[str], None], fresh: Callable[[Fence], bool],
                 on_stale: Callable[[str], None]) -> None:
        self.fence, self._on_lost, self._fresh, self._on_stale = fence, on_lost, fresh, on_stale

    def act(self, runtime_id: str) -> None:
        """Before a model or tool call: give the runtime up and stop the turn if the lease is stale."""
        if not self._fresh(self.fence):
            self._on_stale(runtime_id)
            raise Stale(f'the lease of runtime "{runtime_id}" was not renewed in time')

    def check(self, runtime_id: str, batch: Batch) -> None:
        if not self._fresh(self.fence):
            raise LeaseLost(f'the lease of runtime "{runtime_id}" was not renewed in time; this daemon '
                            "stopped serving it, retry the call")
        batch.fences.append(self.fence)

    def refused(self, runtime_id: str, error: StoreError) -> None:
        if isinstance(error, LeaseLost):
            self._on_lost(runtime_id)
