"""The store's database reachability, as clients see it: health and the RPC gate.

A PostgreSQL store (``store.postgres.link.Link``) reports when its database becomes
unreachable and when it is back, from whichever thread noticed. While it is down,
health is NOT_SERVING and every runtime RPC answers UNAVAILABLE naming the database
(``AgentRuntimeServicer.store_down``), so a client retries instead of reading a half
picture; once the link's prober reconnects, both flip back by themselves. An LMDB
store has no link and nothing is wired.
"""

from __future__ import annotations

import asyncio
from typing import Any

from grpc_health.v1.health import HealthServicer

from .server import set_health
from .servicer import AgentRuntimeServicer


def follow_store(store: Any, health: HealthServicer, servicer: AgentRuntimeServicer) -> None:
    """Keep health and the servicer's gate in step with the store's link (when it has one)."""
    link = getattr(store, "link", None)
    if link is None:
        return
    loop = asyncio.get_running_loop()
    pending: set[asyncio.Task[None]] = set()

    def apply(up: bool) -> None:
        servicer.store_down = None if up else str(link.unavailable())
        if servicer.is_open():
            task = loop.create_task(set_health(health, serving=up))
            pending.add(task)
            task.add_done_callback(pending.discard)

    def changed(up: bool) -> None:  # called on the thread that noticed
        if not loop.is_closed():
            loop.call_soon_threadsafe(apply, up)

    link.on_change(changed)
