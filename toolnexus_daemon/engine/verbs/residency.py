"""A runtime's life in this daemon: load, recovery, serving its turns, eviction.

One object owns the turns running in memory (the one table of turn tasks, by handle id) and the
handles a start found mid-flight, so "what does this daemon run for this runtime, and how does it
stop" has one answer. The engine
drives it: ``load`` then ``recover`` at a start or a cluster take-over, ``wake`` and ``launch``
while serving, ``retire`` and ``stop`` when the runtime is given up or the daemon stops. The
cluster's hand-over belongs here too (stop serving, release, let the next owner ``load``).

It is the one place a turn is launched, and it owns the call loop of turns, visible in one path
(``_run``): a turn runs (``loop.run_turn``); once it ended, its slot under its parent is free and
the parent's next queued wake is started (``spawn_wake.next_queued``) and launched, whose turn
ends the same way. The turn modules decide and record; none of them starts a task.

A store that cannot be reached mid-turn (its database is down) is a restart in miniature
(``heal``): a turn whose commit it refused, or whose end it could not record, hands the runtime
to ``heal``, which stops every turn of the runtime, waits for the store to answer again, reloads
what they left in memory from it and continues every handle the store has running from its last
checkpoint — exactly as recovery after a restart does. Waiters stay on their handles and hear
the turns' ends; nothing the store refused was acknowledged to anyone.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Protocol

from ...errors import LeaseLost, StoreUnavailable
from ...events import EventBus
from ...model import HandleState
from ..commit.landing import Landing
from ..state.change import Change
from ..state.handle import Handle
from ..state.handle_table import HandleTable, Stored
from ..turn import spawn_wake
from ..turn.context import Spawning, Turn, TurnDeps
from ..turn.loop import run_turn

log = logging.getLogger("toolnexus_daemon.engine")

# how often a runtime whose store is away looks whether it is back: from the first, doubling up to
# the last (a look costs nothing while the store knows it is down: PostgreSQL's link fails at once)
HEAL_FIRST_S = 0.1
HEAL_MAX_S = 2.0
# a heal that follows the last one this soon starts from the previous interval, not the first: a
# store that answers reads but refuses writes is looked at every HEAL_MAX_S, never in a loop
HEAL_CALM_S = 30.0


class Resident(Turn, Spawning, Protocol):
    """What the residency needs of its runtime (``Runtime`` satisfies it): what its turns and
    wakes need, the wait for queued commits before a heal reloads, and the bus it closes."""

    @property
    def deps(self) -> TurnDeps: ...
    async def settle_commits(self) -> None:
        """Return once every change queued so far landed or was refused, the event seqs caught up
        with the store (``StoreUnavailable`` while it cannot be read)."""
    @property
    def bus(self) -> EventBus: ...


class Residency:
    """One runtime resident in this daemon: its running turns, its recovery, its heal and stop."""

    def __init__(self, rt: Resident, table: HandleTable) -> None:
        self._rt = rt
        self._table = table
        # the task running each handle's turn: the one place a turn task is kept
        self._turns: dict[str, asyncio.Task[None]] = {}
        # handles ``load`` found running, escalating or holding queued wakes
        self._recovering: list[Handle] = []
        # set when this daemon gave the runtime up (cluster): why its streams and waits ended
        self.retired = ""
        self.gone = asyncio.Event()
        self._stopped = False
        # the heal under way (``heal``), and when the last one ended with the interval it reached
        self._healing: asyncio.Task[None] | None = None
        # a turn failed for the same reason while a heal was under way
        self._again = False
        self._healed_at = -HEAL_CALM_S
        self._heal_delay = HEAL_FIRST_S

    def load(self, stored: list[Stored]) -> None:
        """Read what recovery needs (the root and the store's recovery index) into the table
        (``stored``: as ``handles.recovery_records`` read it through ``Store.read``)."""
        self._recovering = self._table.load_recovering(stored)

    def launch(self, h: Handle, landing: Landing | None = None) -> None:
        """Run ``h``'s turn as a task this residency tracks (and stops); ``landing``: the wake's
        commit, when the turn may ask the model while it syncs.

        Once stopped, nothing launches: a verb that outlived its caller (``detached``) may commit
        after the daemon began to stop or gave the runtime up, and its turn is then the next
        start's or the next owner's to recover — it is ``running`` in the store."""
        if self._stopped:
            return
        task = asyncio.create_task(self._run(h, landing), name=f"turn {self._rt.id} {h.id}")
        self._turns[h.id] = task
        task.add_done_callback(lambda done: self._ended(h.id, done))

    async def wake(self, h: Handle, prompt: str, change: Change, *, to_latest: bool = False) -> bool:
        """Wake ``h`` (with what ``change`` already holds: a fused Spawn's records): its turn
        launched once the wake is committed, or the wake queued behind its siblings. Returns
        whether it was queued; either way the wake is durable when this returns."""
        landing = await spawn_wake.wake_into(self._rt, h, prompt, change, to_latest=to_latest)
        if landing is None:
            return True
        await self._started(h, landing)
        return False

    async def _started(self, h: Handle, landing: Landing) -> None:
        """Launch the turn of a wake whose commit is on its way (it asks the model while the
        wake syncs), and return once that commit is durable."""
        self.launch(h, landing)
        await asyncio.shield(landing.done)

    async def _run(self, h: Handle, landing: Landing | None) -> None:
        """The life of one turn task: the turn, then — once it ended — its freed slot given to the
        parent's queued wakes. A store that cannot be reached hands the runtime to ``heal``."""
        try:
            if await run_turn(self._rt, h, landing):
                await self._slot_freed(h)
        except StoreUnavailable as exc:
            log.warning("the store is unreachable; the turn continues from its checkpoint once it is back",
                        extra={"runtime": self._rt.id, "handle": h.id, "error": str(exc)})
            self.heal()

    async def _slot_freed(self, h: Handle) -> None:
        """``h`` stopped running: launch its parent's queued wakes while slots are free."""
        while (started := await spawn_wake.next_queued(self._rt, h)) is not None:
            await self._started(*started)

    def _ended(self, handle_id: str, task: asyncio.Task[None]) -> None:
        if self._turns.get(handle_id) is task:  # not a later turn of the handle launched meanwhile
            del self._turns[handle_id]

    def turn_of(self, h: Handle) -> asyncio.Task[None] | None:
        """The task running ``h``'s turn, while one runs."""
        return self._turns.get(h.id)

    def recover(self) -> int:
        """Continue every handle that was running (or escalating inline) when the daemon stopped."""
        return self._continue(self._recovering)

    def _continue(self, handles: list[Handle]) -> int:
        for h in handles:
            if h.state is HandleState.SUSPENDED and h.escalating:
                h.state, h.pending, h.escalating = HandleState.RUNNING, None, False
        running = [h for h in handles if h.state is HandleState.RUNNING]
        for h in running:
            self.launch(h)
        return len(running)

    # ------------------------------------------------------------------ the store away mid-turn

    def heal(self) -> None:
        """A turn's commit (or the record of its end) found the store unreachable: stop this
        runtime's turns and continue them from the store once it answers (see the module
        docstring). One heal at a time: a turn that fails while one is under way is redone by it,
        or by the next one when it failed after that heal's reload."""
        if self._stopped:
            return
        if self._healing is not None and not self._healing.done():
            self._again = True
            return
        # ``stop`` ends it (the daemon stops, or the runtime moved away)
        self._healing = asyncio.create_task(self._heal(), name=f"heal {self._rt.id}")

    async def _heal(self) -> None:
        turns = list(self._turns.values())
        for t in turns:
            t.cancel()
        await asyncio.gather(*turns, return_exceptions=True)
        log.warning("the store is unreachable mid-turn; this runtime's turns continue from their last "
                    "checkpoint once it is back", extra={"runtime": self._rt.id, "turns": len(turns)})
        calm = time.monotonic() - self._healed_at >= HEAL_CALM_S
        delay, looks = HEAL_FIRST_S if calm else self._heal_delay, 0
        while True:  # a look per interval until the store answers, or ``stop`` cancels this task
            await self._rt.deps.clock.sleep(delay)
            looks += 1
            try:
                continued = await self._reload()
            except StoreUnavailable:
                delay = min(delay * 2, HEAL_MAX_S)
                continue
            except LeaseLost:  # another daemon took the runtime over meanwhile: its turns are its now
                log.warning("the runtime moved to another daemon during the outage; its turns continue "
                            "there", extra={"runtime": self._rt.id})
                return
            except Exception as exc:  # not an outage (a damaged record, a bug): the next start's to recover
                log.exception("turns could not be continued after the store came back",
                              extra={"runtime": self._rt.id, "error": str(exc)})
                return
            self._healed_at, self._heal_delay = time.monotonic(), delay
            log.warning("the store answers again; turns continued from their last checkpoint",
                        extra={"runtime": self._rt.id, "continued": continued, "looks": looks})
            if self._again:  # a turn failed after the reload: it needs a heal of its own
                self._healing = None
                self.heal()
            return

    async def _reload(self) -> int:
        """Once every queued commit has landed or been refused, reload from the store what the
        stopped turns left in memory and continue every running handle. Synchronous from the
        reload to the launches, so no commit or launch slips in between."""
        # a commit of nothing, fenced by the lease in a cluster: continue only while this daemon
        # still owns the runtime (refused: the runtime is forgotten here, as after any fenced commit)
        await self._rt.commit(Change())
        await self._rt.settle_commits()
        # turns started since the heal began (it awaited the others' ends)
        spared = {hid for hid, t in self._turns.items() if not t.done()}
        self._again = False  # a turn that failed until now is reloaded and continued here
        handles = self._table.reload_mid_turn(lambda h: h.id in spared)
        for h in handles:  # a turn whose end landed as its connection broke: its waiters hear it
            if h.state is not HandleState.RUNNING and not h.escalating and h.last_result is not None:
                h.live.settle(h.last_result)
        continued = self._continue(handles)
        for h in handles:
            if h.wake_queue and h.children and not self._stopped:
                try:
                    await self._slot_freed(self._table.known(h.children[0]))
                except StoreUnavailable:
                    self._again = True  # away again: the next heal starts the queued wakes
                    break
        return continued

    async def recover_queues(self) -> None:
        """Start queued wakes whose slot was freed just before a crash."""
        recovering, self._recovering = self._recovering, []
        for h in recovering:
            if h.wake_queue and h.children:
                await self._slot_freed(self._table.known(h.children[0]))

    def retire(self, reason: str) -> None:
        """This daemon gave the runtime up: its streams and waits end, saying ``reason``."""
        self.retired = reason
        self.gone.set()

    async def stop(self) -> None:
        """Stop running turns without changing their state (they continue on the next start), and
        end live watchers."""
        self._stopped = True
        tasks = list(self._turns.values())
        if self._healing is not None and self._healing is not asyncio.current_task():
            tasks.append(self._healing)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._rt.bus.close()
