"""The engine verbs the MCP edge uses, for a runtime held here or — in a cluster — elsewhere.

:class:`Verbs` calls the engine; when the engine answers ``Moved`` (a live daemon of the cluster
owns the runtime) it calls the :class:`Remote` the composition root gave it, which sends the same
verb to the owner (over gRPC, in ``api/``; this package imports none of it). What comes back is
the daemon's own model either way, so the rest of the edge never knows where the runtime lives.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar

from ..engine.commit.ownership import Moved
from ..engine.state.handle import Handle
from ..engine.verbs.engine import Engine
from ..engine.verbs.runtime import Runtime
from ..model import ROOT_ID, Answer, HandleState, Request, TaskResult

T = TypeVar("T")


@dataclass(frozen=True)
class View:
    """What a task needs to know of a handle."""

    id: str
    state: HandleState
    depth: int
    pending: Request | None
    last_result: TaskResult | None
    spawned_at: float = 0.0  # seconds since the epoch; 0 = not known (then "now")


def view_of(h: Handle) -> View:
    return View(h.id, h.state, h.depth, h.pending, h.last_result, h.spawned_at)


class Remote(Protocol):
    """The verbs, sent to the daemon that owns the runtime (``moved`` names it)."""

    async def agents(self, moved: Moved, runtime_id: str) -> list[tuple[str, str]]: ...
    async def spawn_awake(self, moved: Moved, runtime_id: str, agent: str, prompt: str) -> str: ...
    async def wait(self, moved: Moved, runtime_id: str, handle: str) -> TaskResult: ...
    async def resume(self, moved: Moved, runtime_id: str, answer: Answer) -> None: ...
    async def view(self, moved: Moved, runtime_id: str, handle: str) -> View: ...
    async def views(self, moved: Moved, runtime_id: str) -> list[View]: ...
    async def interrupt(self, moved: Moved, runtime_id: str, handle: str) -> None: ...
    async def close(self, moved: Moved, runtime_id: str, handle: str) -> None: ...


class Verbs:
    """Each verb on the runtime here, or on its owner when it lives elsewhere."""

    def __init__(self, engine: Engine, remote: Remote | None = None) -> None:
        self.engine = engine
        self.remote = remote

    async def _either(self, runtime_id: str, here: Callable[[Runtime], Awaitable[T]],
                      there: Callable[[Remote, Moved], Awaitable[T]]) -> T:
        try:
            rt = await self.engine.open(runtime_id)
        except Moved as moved:
            if self.remote is None:
                raise
            return await there(self.remote, moved)
        return await here(rt)

    async def agents(self, runtime_id: str) -> list[tuple[str, str]]:
        async def here(rt: Runtime) -> list[tuple[str, str]]:
            return [(a.name, a.does) for a in rt.agents.values()]
        return await self._either(runtime_id, here, lambda r, m: r.agents(m, runtime_id))

    async def last_seq(self, runtime_id: str) -> int | None:
        """The runtime's last event seq when it is held here (progress follows only those)."""
        async def here(rt: Runtime) -> int | None:
            return rt.last_seq()

        async def there(remote: Remote, moved: Moved) -> int | None:
            return None
        return await self._either(runtime_id, here, there)

    async def spawn_awake(self, runtime_id: str, agent: str, prompt: str) -> str:
        async def here(rt: Runtime) -> str:
            return (await rt.spawn_awake(ROOT_ID, agent, None, prompt, 0)).handle
        return await self._either(runtime_id, here, lambda r, m: r.spawn_awake(m, runtime_id, agent, prompt))

    async def wait(self, runtime_id: str, handle: str) -> TaskResult:
        async def here(rt: Runtime) -> TaskResult:
            return await rt.wait(handle)
        return await self._either(runtime_id, here, lambda r, m: r.wait(m, runtime_id, handle))

    async def resume(self, runtime_id: str, answer: Answer) -> None:
        async def here(rt: Runtime) -> None:
            await rt.resume(answer, no_wait=True)
        return await self._either(runtime_id, here, lambda r, m: r.resume(m, runtime_id, answer))

    async def view(self, runtime_id: str, handle: str) -> View:
        async def here(rt: Runtime) -> View:
            await rt.durable()  # never report a state a crash could take back
            await rt.fetch(handle)  # parked on disk: read off the event loop
            return view_of(rt.snapshot(handle))
        return await self._either(runtime_id, here, lambda r, m: r.view(m, runtime_id, handle))

    async def views(self, runtime_id: str) -> list[View]:
        async def here(rt: Runtime) -> list[View]:
            await rt.durable()
            return [view_of(h) for h in await rt.fetch_all()]
        return await self._either(runtime_id, here, lambda r, m: r.views(m, runtime_id))

    async def interrupt(self, runtime_id: str, handle: str) -> None:
        async def here(rt: Runtime) -> None:
            await rt.interrupt(handle)
        return await self._either(runtime_id, here, lambda r, m: r.interrupt(m, runtime_id, handle))

    async def close(self, runtime_id: str, handle: str) -> None:
        async def here(rt: Runtime) -> None:
            await rt.close(handle)
        return await self._either(runtime_id, here, lambda r, m: r.close(m, runtime_id, handle))
