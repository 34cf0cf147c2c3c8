"""One runtime: its registry and event bus, the owners of its state, and one method per verb.

The state has owners of its own: the handle table (``handles.py``), the request index
(``requests.py``), the runtime's log on the engine's one committer (``committer.py``: every
change, its checkpoint and its events land in one store transaction, in order, with gapless
event seqs, and only then are the events published live; a refused commit reloads the touched
handles) and the lifetime (``lifetime.py``:
load, recovery, running turns, stop). The verb modules see this class only through
``context.RuntimeContext``, so the engine's imports run one way.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Callable, Mapping
from dataclasses import dataclass, field, replace

from ..bounds import PeerLimits
from ..clock import Clock, rfc3339
from ..errors import (
    DefinitionChanged,
    FailedPrecondition,
    InvalidArgument,
    OutOfRange,
    ResourceExhausted,
    Unavailable,
)
from ..events import EventBus
from ..llm.base import ModelTransport
from ..model import (
    JSON,
    ROOT_ID,
    AgentDef,
    Answer,
    Budget,
    Event,
    EventType,
    HandleState,
    InboxItem,
    LlmConfig,
    RuntimeOptions,
    Status,
    TaskResult,
    ToolResult,
    ToolSource,
)
from ..store.base import Store
from ..tools.base import Resolver, ToolExecutor
from . import drift, lifecycle, notes, wakes
from . import resume as resume_mod
from . import task as task_mod
from .change import Change
from .checkpoint import Call
from .committer import AllowAll, CommitGuard, Committer
from .detached import run_to_end
from .fingerprint import DefinitionChange
from .handle import Handle
from .handles import HandleTable
from .landing import Landing
from .lifetime import RuntimeLifetime
from .requests import RequestIndex
from .resume import ResumeOutcome
from .waiting import ResultWait
from .watch import watch as watch_events

log = logging.getLogger("toolnexus_daemon.engine")

# event seqs are stored as unsigned 64-bit keys with room to spare
MAX_SEQ = 2**63
# how many times ``settle_commits`` waits for changes queued while it waited
SETTLE_ROUNDS = 100


@dataclass(frozen=True)
class Woken:
    """What a (fused) wake did: the handle, whether the wake was queued behind the parent's
    running children, and the registered wait for its turn's result when one was asked for."""

    handle: str
    queued: bool
    wait: ResultWait | None = None


# a Resume's wait for the result its answer leads to
Waiter = asyncio.Future[TaskResult]


@dataclass
class RuntimeDeps:
    store: Store
    clock: Clock
    model: ModelTransport
    executors: Mapping[ToolSource, ToolExecutor]
    # the engine's one commit path, shared by all its runtimes (their changes share transactions)
    committer: Committer
    resolver: Resolver | None = None
    # sees every committed batch of events (metrics); must not block or raise
    observer: Callable[[Runtime, list[Event]], None] | None = None
    # what model replies and tool results may carry before they are committed
    limits: PeerLimits = field(default_factory=PeerLimits)
    # asked for this runtime's part of every store transaction (the cluster's lease check)
    guard: CommitGuard = field(default_factory=AllowAll)
    # what answer links start with (--answers-base-url); "" = the daemon serves none
    answer_base: str = ""


class Runtime:
    def __init__(self, runtime_id: str, agents: list[AgentDef], llm: LlmConfig, options: RuntimeOptions,
                 deps: RuntimeDeps, created_at: float, key_digest: str = "") -> None:
        self.id = runtime_id
        # sha256 hex of the runtime secret (empty = unprotected); the secret itself is never stored
        self.key_digest = key_digest
        self.agents = {a.name: a for a in agents}
        self.llm = llm
        self.options = options
        self.deps = deps
        self.created_at = created_at
        self.table = HandleTable(deps.store, runtime_id)
        self.handles = self.table.cache
        self.bus = EventBus()
        self.lifetime = RuntimeLifetime(self, self.table)
        self.turn_gate = asyncio.Semaphore(options.max_concurrent_turns)
        next_seq = deps.store.last_seq(runtime_id) + 1
        self.requests = RequestIndex(deps.store, runtime_id)
        first = deps.store.events(runtime_id, 0, 1)
        self._log = deps.committer.open(self, next_seq, first[0].seq if first else next_seq, deps.guard)
        self._resume_lock = asyncio.Lock()
        self._escalations: dict[str, asyncio.Lock] = {}

    # ------------------------------------------------------------------ records

    def record(self) -> JSON:
        return {"id": self.id, "agents": [a.to_json() for a in self.agents.values()],
                "llm": self.llm.to_json(), "options": self.options.to_json(), "created_at": self.created_at,
                "key_digest": self.key_digest}

    def replace_registry(self, agents: list[AgentDef], llm: LlmConfig, options: RuntimeOptions,
                         model: ModelTransport) -> None:
        self.agents = {a.name: a for a in agents}
        self.llm, self.options = llm, options
        self.deps = replace(self.deps, model=model)
        self.turn_gate = asyncio.Semaphore(options.max_concurrent_turns)

    # ------------------------------------------------------------------ commit

    async def commit(self, change: Change) -> None:
        """Commit ``change`` atomically, in order with every other change of this runtime."""
        await self.deps.committer.commit(self._log, change)

    async def purge(self) -> None:
        """Delete every record of this runtime, through the commit path (so fenced in a cluster)."""
        await self.commit(Change(purge=True))

    def start_commit(self, change: Change) -> asyncio.Future[None]:
        """Queue ``change`` in order now; the future tells when it is durable (``landing``). A
        refusal nobody waits for any more (the turn was interrupted) is still marked as seen."""
        done = self.deps.committer.submit(self._log, change)
        done.add_done_callback(_seen)
        return done

    def publish(self, events: list[Event]) -> None:
        """Committed events: to live watchers, then to the observer (metrics, logs)."""
        self.bus.publish(events)
        if self.deps.observer is not None:
            self.deps.observer(self, events)

    @property
    def first_seq(self) -> int:
        """The oldest seq still stored (event retention drops older ones)."""
        return self._log.first_seq

    def check_retained(self, after_seq: int) -> None:
        """OUT_OF_RANGE when events after ``after_seq`` were already dropped by retention."""
        if after_seq + 1 < self.first_seq:
            raise OutOfRange(f"events before seq {self.first_seq} were dropped (event_retention "
                             f"{self.options.event_retention}); the first retained seq is {self.first_seq}: "
                             f"watch with after_seq >= {self.first_seq - 1}")

    def last_seq(self) -> int:
        return self._log.next_seq - 1

    # ------------------------------------------------------------------ lookups

    def agent_of(self, h: Handle) -> AgentDef:
        agent = self.agents.get(h.agent)
        if agent is None:
            raise DefinitionChanged(
                f'handle "{h.id}" runs agent "{h.agent}", which the current registry no longer defines')
        return agent

    def max_turns(self, h: Handle) -> int:
        return h.budget.max_turns or self.options.max_turns

    # ------------------------------------------------------------------ verbs

    async def create_root(self) -> None:
        root = Handle(id=ROOT_ID, agent="", parent=None, depth=0, spawned_at=self.deps.clock.now())
        self.handles[ROOT_ID] = root
        change = Change(runtime=True).save(root)
        await self.commit(change)

    async def spawn(self, parent_id: str, agent_name: str, budget: Budget | None = None,
                    task_key: str = "") -> Handle:
        return await wakes.spawn(self, parent_id, agent_name, budget, task_key)

    async def wake(self, handle_id: str, prompt: str) -> bool:
        """``idle→running`` once durable (or queued behind the parent's running children)."""
        return await wakes.wake(self, self.table.handle(handle_id), prompt)

    async def wake_for(self, handle_id: str, prompt: str, wait_ms: int) -> Woken:
        """``wake``, and with ``wait_ms`` > 0 a wait for the result of the turn it starts (a queued
        wake: the turn that consumes it), registered before the wake commits so no settle is missed."""
        h = self.table.handle(handle_id)
        return await self._woken(h, prompt, wait_ms, Change())

    async def spawn_awake(self, parent_id: str, agent_name: str, budget: Budget | None, prompt: str,
                          wait_ms: int) -> Woken:
        """Spawn and wake in one commit: the ``spawned`` event and ``idle→running`` (or the queued
        wake) are durable together, one synced commit instead of Spawn's and Wake's two."""
        child, change = wakes.spawned(self, parent_id, agent_name, budget, "")
        return await self._woken(child, prompt, wait_ms, change)

    async def _woken(self, h: Handle, prompt: str, wait_ms: int, change: Change) -> Woken:
        waiting = ResultWait(h, self.deps.clock, wait_ms) if wait_ms > 0 else None
        try:
            queued = await wakes.wake_into(self, h, prompt, change)
        except BaseException:
            if waiting is not None:
                waiting.drop()
            raise
        return Woken(h.id, queued, waiting)

    async def wait(self, handle_id: str, timeout_ms: int = 0) -> TaskResult:
        h = self.table.handle(handle_id)
        if settled_result(h) is not None:
            await self._log.barrier()  # report only what is on disk
            # a change refused meanwhile left memory ahead of the store: reload it first (UNAVAILABLE
            # while the store cannot be read — never a result that was not recorded)
            self.table.settle_restores()
            settled = settled_result(h)
            if settled is not None:
                return settled
        return await ResultWait(h, self.deps.clock, timeout_ms).result()

    def waiter(self, h: Handle) -> asyncio.Future[TaskResult]:
        fut: asyncio.Future[TaskResult] = asyncio.get_running_loop().create_future()
        h.waiters.append(fut)
        return fut

    async def resume(self, answer: Answer, handle_id: str = "", no_wait: bool = False,
                     accept_changed_definition: bool = False) -> ResumeOutcome:
        """Route ``answer`` by id, continue the leaf from its checkpoint, cascade up (docs/protocol.md §4);
        a suspended tool whose definition changed since is refused unless accepted (§11)."""
        accepted, fut = await run_to_end(self._accept(answer, handle_id, no_wait, accept_changed_definition))
        top = accepted.chain[-1]
        if fut is None:
            return ResumeOutcome(top.id, None, accepted.duplicate)
        settled = settled_result(top) if accepted.duplicate else None
        try:
            result = settled if settled is not None else await asyncio.shield(fut)
        finally:
            if fut in top.waiters:
                top.waiters.remove(fut)
        return ResumeOutcome(top.id, result, accepted.duplicate)

    async def _accept(self, answer: Answer, handle_id: str, no_wait: bool,
                      accept_changed_definition: bool) -> tuple[resume_mod.Accepted, Waiter | None]:
        """Accept ``answer`` and launch the turns it continues, as one step that runs to its end: an
        answer made durable always has its turns running (``detached``). The waiter for the top
        handle is registered before the commit, so a settle that follows at once is not missed; if
        the caller left meanwhile, that settle drops it."""
        async with self._resume_lock:
            await self._log.barrier()  # a suspension still being committed is found, not NOT_FOUND
            # the entry accept reads, and the handles waiting on it if they are parked on disk, read
            # off the event loop; the entry again if loading them awaited (accept's get is fresh)
            entry = await self.requests.fetch(answer.id)
            if entry is not None and await self.table.fetch([*entry.pending(), *filter(None, [handle_id])]):
                await self.requests.fetch(answer.id)
            accepted, change = resume_mod.accept(self, answer, handle_id, accept_changed_definition)
            top = accepted.chain[-1]
            fut = None if no_wait else self.waiter(top)
            if change is not None:
                try:
                    await self.commit(change)
                except BaseException:  # refused: nobody will wait on this one
                    if fut is not None and fut in top.waiters:
                        top.waiters.remove(fut)
                    raise
                for h in accepted.chain:
                    self.launch(h)
        return accepted, fut

    async def durable(self) -> None:
        """Wait until every change made so far is on disk (before reporting state to a client); the
        handles of a change refused meanwhile are reloaded from the store (``StoreUnavailable``
        while it cannot be read: never a state that was not recorded). In a cluster, UNAVAILABLE if
        this daemon gave the runtime up meanwhile: its memory may be older than what the next owner
        committed."""
        await self._log.barrier()
        if self.lifetime.retired:
            raise Unavailable(f"{self.lifetime.retired}; retry the call")
        self.table.settle_restores()

    def snapshot(self, handle_id: str) -> Handle:
        return self.table.handle(handle_id)

    def definition_changed(self, h: Handle) -> list[DefinitionChange]:
        """What changed, since ``h`` suspended, in what its answer will be fed to (docs/protocol.md §11)."""
        return drift.found(self, h)

    def list(self) -> list[Handle]:
        """Every handle in pre-order (spawn order within a parent), root excluded."""
        return self.table.preorder()[1:]

    async def post(self, handle_id: str, item: InboxItem) -> int:
        """Append an inbox item and return its 1-based place in the inbox; a full inbox rejects at
        once (docs/protocol.md §4 Inbox)."""
        h = self.table.handle(handle_id)
        if h.state is HandleState.CLOSED:
            raise FailedPrecondition(f"inbox closed: {h.id}")
        if len(h.inbox) >= self.options.inbox_cap:
            note = notes.post_rejected(h.id, self.options.inbox_cap, item.from_ or "app")
            await self.commit(Change().event(h, EventType.POST, note, data={"rejected": True}))
            raise ResourceExhausted(f"inbox full: {h.id}")
        h.inbox.append(item)
        note = f"{h.id}: post from {item.from_ or 'app'} on {item.channel or 'default'}"
        await self.commit(Change().save(h).event(h, EventType.POST, note))
        return len(h.inbox)

    async def interrupt(self, handle_id: str) -> lifecycle.Interrupted:
        """Runs to its end once started (``detached``): a turn it stopped is always settled."""
        return await run_to_end(lifecycle.interrupt(self, self.table.handle(handle_id)))

    async def close(self, handle_id: str) -> None:
        await run_to_end(lifecycle.close(self, self.table.handle(handle_id), "closed by request"))

    async def shutdown(self) -> None:
        await run_to_end(lifecycle.shutdown(self))

    def watch(self, after_seq: int, types: frozenset[EventType], handle: str) -> AsyncGenerator[Event, None]:
        if handle:
            self.table.handle(handle)
        if not 0 <= after_seq < MAX_SEQ:
            raise InvalidArgument(f"after_seq {after_seq} is not an event seq (0 to {MAX_SEQ - 1})")
        last = self.last_seq()
        if after_seq > last:
            raise OutOfRange(f"after_seq {after_seq} is past the last event of runtime \"{self.id}\" "
                             f"(seq {last}); watch with after_seq <= {last}")
        self.check_retained(after_seq)
        return watch_events(self, after_seq, types, handle)

    async def run_task(self, parent: Handle, call: Call) -> ToolResult:
        return await task_mod.run_task(self, parent, call)

    def publish_text(self, h: Handle, delta: str) -> None:
        """A streamed model delta: live only, never stored, so it takes no seq (docs/protocol.md §3)."""
        self.bus.publish([Event(seq=0, runtime_id=self.id, handle=h.id, type=EventType.TEXT,
                                at=rfc3339(self.deps.clock.now()), data={"delta": delta})])

    async def commit_record(self, before: Mapping[str, AgentDef] | None = None,
                            before_llm: LlmConfig | None = None) -> None:
        """Persist the runtime record (after its registry was replaced), with a ``reattach`` event
        on every suspended handle the new registry changed the definition of (docs/protocol.md §11)."""
        change = Change(runtime=True)
        if before is not None and before_llm is not None:
            drift.reattach_events(self, before, before_llm, change)
        await self.commit(change)

    # ------------------------------------------------------------------ turns

    def launch(self, h: Handle, landing: Landing | None = None) -> None:
        self.lifetime.launch(h, landing)

    def store_unreachable(self) -> None:
        self.lifetime.heal()

    async def settle_commits(self) -> None:
        for _ in range(SETTLE_ROUNDS):  # each round waits for a commit queued meanwhile
            await self._log.barrier()
            if self._log.settled:
                self._log.resync(self.deps.store.last_seq(self.id))
                return

    @property
    def retired(self) -> str:
        """Why this daemon gave the runtime up (empty while it serves it)."""
        return self.lifetime.retired

    @property
    def gone(self) -> asyncio.Event:
        """Set once this daemon gave the runtime up: streams and waits on it end."""
        return self.lifetime.gone

    def escalation_lock(self, h: Handle) -> asyncio.Lock:
        """Serialises inline escalations of one handle (its state flips once per escalation)."""
        return self._escalations.setdefault(h.id, asyncio.Lock())


def settled_result(h: Handle) -> TaskResult | None:
    """The 'last result' branch of Wait: a settled handle answers at once."""
    if h.state is HandleState.CLOSED:
        return h.last_result or h.result(Status.CLOSED, "closed")
    if h.state is HandleState.SUSPENDED:
        return h.last_result
    if h.state is HandleState.IDLE and h.last_result is not None:
        return h.last_result
    return None


def _seen(done: asyncio.Future[None]) -> None:
    """Mark a commit's refusal as retrieved (its waiter, if any, still gets it)."""
    if not done.cancelled():
        done.exception()
