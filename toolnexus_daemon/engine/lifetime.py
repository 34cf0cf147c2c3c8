"""A runtime's life in this daemon: load, recovery, serving its turns, eviction.

One object owns the turns running in memory and the handles a start found mid-flight, so
"what does this daemon run for this runtime, and how does it stop" has one answer. The engine
drives it: ``load`` then ``recover`` at a start or a cluster take-over, ``launch`` while serving,
``retire`` and ``stop`` when the runtime is given up or the daemon stops. The cluster's
hand-over belongs here too (stop serving, release, let the next owner ``load``).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from ..model import HandleState
from . import wakes
from .handle import Handle
from .handles import HandleTable
from .landing import Landing
from .turn import run_turn

if TYPE_CHECKING:
    from .context import RuntimeContext


class RuntimeLifetime:
    def __init__(self, rt: RuntimeContext, table: HandleTable) -> None:
        self._rt = rt
        self._table = table
        self._tasks: set[asyncio.Task[None]] = set()
        # handles ``load`` found running, escalating or holding queued wakes
        self._recovering: list[Handle] = []
        # set when this daemon gave the runtime up (cluster): why its streams and waits ended
        self.retired = ""
        self.gone = asyncio.Event()
        self._stopped = False

    def load(self) -> None:
        """Read what recovery needs (the root and the store's recovery index) into the table."""
        self._recovering = self._table.load_recovering()

    def launch(self, h: Handle, landing: Landing | None = None) -> None:
        """Run ``h``'s turn as a task this lifetime tracks (and stops); ``landing``: the wake's
        commit, when the turn may ask the model while it syncs.

        Once stopped, nothing launches: a verb that outlived its caller (``detached``) may commit
        after the daemon began to stop or gave the runtime up, and its turn is then the next
        start's or the next owner's to recover — it is ``running`` in the store."""
        if self._stopped:
            return
        task = asyncio.create_task(run_turn(self._rt, h, landing), name=f"turn {self._rt.id} {h.id}")
        h.task = task
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def recover(self) -> int:
        """Continue every handle that was running (or escalating inline) when the daemon stopped."""
        for h in self._recovering:
            if h.state is HandleState.SUSPENDED and h.escalating:
                h.state, h.pending, h.escalating = HandleState.RUNNING, None, False
        running = [h for h in self._recovering if h.state is HandleState.RUNNING]
        for h in running:
            self.launch(h)
        return len(running)

    async def recover_queues(self) -> None:
        """Start queued wakes whose slot was freed just before a crash."""
        recovering, self._recovering = self._recovering, []
        for h in recovering:
            if h.wake_queue and h.children:
                await wakes.slot_freed(self._rt, self._rt.handles[h.children[0]])

    def retire(self, reason: str) -> None:
        """This daemon gave the runtime up: its streams and waits end, saying ``reason``."""
        self.retired = reason
        self.gone.set()

    async def stop(self) -> None:
        """Stop running turns without changing their state (they continue on the next start), and
        end live watchers."""
        self._stopped = True
        tasks = list(self._tasks)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._rt.bus.close()
