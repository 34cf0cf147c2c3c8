"""One runtime: its registry and event bus, the owners of its state, and one method per verb.

The state has owners of its own: the handle table (``state/handle_table.py``), the request index
(``state/request_index.py``), the runtime's log on the engine's one committer (``committer.py``: every
change, its checkpoint and its events land in one store transaction, in order, with gapless
event seqs, and only then are the events published live; a refused commit reloads the touched
handles) and the residency (``residency.py``:
load, recovery, the one place turns are launched and their slots freed, stop). The turn modules
see this class only through the small role protocols of ``turn/context.py`` (and the residency
through its ``Resident``), so the engine's imports run one way.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Callable, Mapping
from dataclasses import dataclass, field, replace

from ...bounds import PeerLimits
from ...clock import Clock, rfc3339
from ...errors import (
    DataLoss,
    DefinitionChanged,
    FailedPrecondition,
    InvalidArgument,
    OutOfRange,
    ResourceExhausted,
    StoreError,
    Unavailable,
)
from ...events import EventBus
from ...llm.base import ModelTransport
from ...model import (
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
    ToolSource,
)
from ...store.base import Store
from ...tools.base import Resolver, ToolExecutor
from ..commit.committer import AllowAll, CommitGuard, Committer
from ..definitions import versions
from ..definitions.fingerprint import DefinitionChange
from ..definitions.versions import RegistryVersion
from ..state import notes
from ..state.change import Change
from ..state.handle import Handle
from ..state.handle_table import HandleTable
from ..state.held import HeldBudget
from ..state.request_index import RequestIndex
from ..state.result_wait import ResultWait
from ..turn import drift, ending, spawn_wake
from ..turn.tracing import NOOP, Tracer
from . import resume as resume_mod
from .detached import run_to_end
from .event_stream import watch as watch_events
from .residency import Residency
from .resume import ResumeOutcome

log = logging.getLogger("toolnexus_daemon.engine")

# event seqs are stored as unsigned 64-bit keys with room to spare
MAX_SEQ = 2**63
# how many times ``settle_commits`` waits for changes queued while it waited
SETTLE_ROUNDS = 100
# the most often a runtime's unused registry versions are swept (each sweep reads every handle)
SWEEP_EVERY_S = 60.0


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
    # where the spans of turns, model calls and tool calls go (``tracing``; off by default)
    tracer: Tracer = NOOP
    # builds the model transport of an older version whose LLM config differs from the latest's
    model_for: Callable[[LlmConfig], ModelTransport] | None = None
    # the daemon's one bound on what its runtimes hold of their committed records (``state.held``)
    held: HeldBudget = field(default_factory=HeldBudget)


class Runtime:
    def __init__(self, runtime_id: str, agents: list[AgentDef], llm: LlmConfig, options: RuntimeOptions,
                 deps: RuntimeDeps, created_at: float, key_digest: str = "",
                 version: RegistryVersion | None = None, version_stored: bool = False,
                 seqs: tuple[int, int] | None = None) -> None:
        """``seqs``: the runtime's next and first event seq (``stored_seqs``) when the caller read
        them through ``Store.read``; None reads them here (a start, before serving)."""
        self.id = runtime_id
        # sha256 hex of the runtime secret (empty = unprotected); the secret itself is never stored
        self.key_digest = key_digest
        self.agents = {a.name: a for a in agents}
        self.llm = llm
        self.options = options
        self.deps = deps
        self.created_at = created_at
        self.table = HandleTable(deps.store, runtime_id, deps.held)
        self.bus = EventBus()
        self.residency = Residency(self, self.table)
        self.turn_gate = asyncio.Semaphore(options.max_concurrent_turns)
        next_seq, first_seq = seqs if seqs is not None else stored_seqs(deps.store, runtime_id)
        self.requests = RequestIndex(deps.store, runtime_id, self.table.held)
        self._log = deps.committer.open(self, next_seq, first_seq, deps.guard)
        self._resume_lock = asyncio.Lock()
        # the latest registry version and the older ones read so far (docs/versions.md)
        latest = version or versions.make(1, agents, llm, created_at)
        self.version = latest.number
        self._versions: dict[int, RegistryVersion] = {latest.number: latest}
        # versions made here whose record is not yet durable: written with the next runtime record
        self._unstored: set[int] = set() if version_stored else {latest.number}
        # model transports of older versions whose LLM config differs from the latest's
        self._models: dict[int, ModelTransport] = {}
        # when unused versions were last swept (``sweep_versions``); None: not yet
        self._swept_at: float | None = None

    # ------------------------------------------------------------------ records

    @property
    def clock(self) -> Clock:
        """The engine's clock (the commit path stamps this runtime's events with it)."""
        return self.deps.clock

    def record(self) -> JSON:
        return {"id": self.id, "agents": [a.to_json() for a in self.agents.values()],
                "llm": self.llm.to_json(), "options": self.options.to_json(), "created_at": self.created_at,
                "key_digest": self.key_digest, "version": self.latest.meta()}

    @property
    def latest(self) -> RegistryVersion:
        return self._versions[self.version]

    def replace_registry(self, agents: list[AgentDef], llm: LlmConfig, options: RuntimeOptions,
                         model: ModelTransport) -> RegistryVersion:
        """Take the registry of a reattaching ``New``: a new latest version when it differs from the
        latest (older versions stay, for the handles pinned to them), the same one when identical."""
        if versions.digest(agents, llm) != self.latest.digest:
            made = versions.make(self.version + 1, agents, llm, self.deps.clock.now())
            self._versions[made.number] = made
            self._unstored.add(made.number)
            self.version = made.number
        self.agents = {a.name: a for a in agents}
        self.llm, self.options = llm, options
        self.deps = replace(self.deps, model=model)
        self.turn_gate = asyncio.Semaphore(options.max_concurrent_turns)
        return self.latest

    # ------------------------------------------------------------------ versions

    def registry(self, number: int) -> RegistryVersion:
        """Version ``number`` (0: the latest), read from the store on first use."""
        found = self._versions.get(number or self.version)
        if found is not None:
            return found
        rec = self.deps.store.get_version(self.id, versions.key_of(number))
        if rec is None:
            raise DataLoss(f'registry version {number} of runtime "{self.id}" is not stored; a handle '
                           "pinned to it cannot run")
        found = RegistryVersion.from_record(rec)
        self._versions[number] = found
        return found

    def registry_of(self, h: Handle) -> RegistryVersion:
        return self.registry(h.version)

    def llm_of(self, h: Handle) -> LlmConfig:
        return self.registry_of(h).llm

    def model_of(self, h: Handle) -> ModelTransport:
        """The transport of ``h``'s version: the latest's when their LLM configs are equal."""
        reg = self.registry_of(h)
        if reg.llm == self.llm or self.deps.model_for is None:
            return self.deps.model
        model = self._models.get(reg.number)
        if model is None:
            model = self._models[reg.number] = self.deps.model_for(reg.llm)
        return model

    def stored_versions(self) -> list[RegistryVersion]:
        """Every version of the runtime, oldest first (stored ones and any not yet durable)."""
        found = {v.number: v for v in (RegistryVersion.from_record(r)
                                        for r in self.deps.store.versions(self.id))}
        for number in tuple(self._unstored):  # a copy: ListVersions calls this on a thread
            found[number] = self._versions[number]
        return [found[n] for n in sorted(found)]

    async def sweep_versions(self) -> list[int]:
        """Delete the versions that are not the latest and that no handle used for
        ``version_grace_ms`` (marking newly unused ones); returns the numbers deleted.

        Reads every handle record once (off the event loop), after a New, at most once a minute (or
        once a grace when shorter), and only when a version other than the latest is stored.
        A version unused now stays unused — a handle only ever moves to the latest, and a spawn
        takes its parent's version, which the parent still holds."""
        now = self.deps.clock.now()
        grace_s = self.options.version_grace_ms / 1000
        if self._swept_at is not None and now - self._swept_at < min(SWEEP_EVERY_S, grace_s):
            return []
        self._swept_at = now
        rid = self.id
        records = await self.deps.store.read(lambda store: store.versions(rid))
        if all(int(r.get("number") or 0) == self.version for r in records):
            return []  # only the latest is stored: nothing to look at, no handle read
        used = await asyncio.to_thread(self._versions_in_use)
        used |= {h.version or self.version for h in self.table.loaded() if h.id != ROOT_ID}
        plan = versions.sweep_plan(records, used, self.version, now, grace_s)
        if not plan:
            return []
        await self.commit(Change(versions=plan))
        gone = [int(key) for key, rec in plan.items() if rec is None]
        for number in gone:
            self._versions.pop(number, None)
            model = self._models.pop(number, None)
            if model is not None:
                await model.aclose()
        return gone

    def _versions_in_use(self) -> set[int]:
        """The versions the stored handles run (root runs no agent: it holds none)."""
        return {int(rec.get("version") or 1) for rec in self.deps.store.handles(self.id)
                if rec.get("id") != ROOT_ID}

    async def aclose_models(self) -> None:
        models, self._models = list(self._models.values()), {}
        for model in models:
            await model.aclose()

    # ------------------------------------------------------------------ commit

    async def commit(self, change: Change) -> None:
        """Commit ``change`` atomically, in order with every other change of this runtime. A change of
        the runtime record carries the versions made since the last one (stored once each)."""
        written = set(self._unstored) if change.runtime and not change.purge else set()
        for number in written:
            change.versions[versions.key_of(number)] = self._versions[number].record()
        await self.deps.committer.commit(self._log, change)
        self._unstored -= written

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
        reg = self.registry_of(h)
        agent = reg.agents.get(h.agent)
        if agent is None:
            raise DefinitionChanged(f'handle "{h.id}" runs agent "{h.agent}", which registry version '
                                    f"{reg.number} does not define")
        return agent

    # ------------------------------------------------------------------ verbs

    async def create_root(self) -> None:
        root = Handle(id=ROOT_ID, agent="", parent=None, depth=0, spawned_at=self.deps.clock.now(),
                      version=self.version)
        self.table.add(root)
        change = Change(runtime=True).save(root)
        await self.commit(change)

    async def fetch(self, *handle_ids: str) -> bool:
        """Read the named handles (and their ancestors) that are parked on disk into memory through
        ``Store.read`` — off the event loop on PostgreSQL — with the registry versions they run,
        for the synchronous lookups that follow with nothing awaited between (``snapshot``,
        ``watch``, the verbs below, the turns they start); what is in memory costs nothing.
        Returns whether the store was read (something was awaited)."""
        named = [hid for hid in handle_ids if hid]
        read = await self.table.fetch(named)
        numbers = {n for n in self._versions_run(named) if n not in self._versions}
        if not numbers:
            return read
        rid = self.id
        try:
            found = await self.deps.store.read(
                lambda store: {n: store.get_version(rid, versions.key_of(n)) for n in numbers})
        except StoreError:
            return True  # left for the lookup, which reports it as it always does
        for number, rec in found.items():
            if rec is not None:
                self._versions.setdefault(number, RegistryVersion.from_record(rec))
        return True

    def _versions_run(self, handle_ids: list[str]) -> set[int]:
        """The registry versions the handles in memory among ``handle_ids`` and their ancestors run."""
        out: set[int] = set()
        for hid in handle_ids:
            h = self.table.peek(hid)
            while h is not None:
                if h.version:
                    out.add(h.version)
                h = self.table.peek(h.parent) if h.parent is not None else None
        return out

    async def _handle(self, handle_id: str) -> Handle:
        await self.fetch(handle_id)
        return self.table.handle(handle_id)

    async def spawn(self, parent_id: str, agent_name: str, budget: Budget | None = None,
                    task_key: str = "") -> Handle:
        await self.fetch(parent_id)
        return await spawn_wake.spawn(self, parent_id, agent_name, budget, task_key)

    async def wake(self, handle_id: str, prompt: str) -> bool:
        """``idle→running`` once durable (or queued behind the parent's running children)."""
        return await self.residency.wake(await self._handle(handle_id), prompt, Change())

    async def wake_for(self, handle_id: str, prompt: str, wait_ms: int, upgrade: bool = False) -> Woken:
        """``wake``, and with ``wait_ms`` > 0 a wait for the result of the turn it starts (a queued
        wake: the turn that consumes it), registered before the wake commits so no settle is missed.
        ``upgrade`` moves the handle (and its idle subtree) to the latest registry version."""
        h = await self._handle(handle_id)
        return await self._woken(h, prompt, wait_ms, Change(), upgrade)

    async def spawn_awake(self, parent_id: str, agent_name: str, budget: Budget | None, prompt: str,
                          wait_ms: int) -> Woken:
        """Spawn and wake in one commit: the ``spawned`` event and ``idle→running`` (or the queued
        wake) are durable together, one synced commit instead of Spawn's and Wake's two."""
        await self.fetch(parent_id)
        child, change = spawn_wake.spawned(self, parent_id, agent_name, budget, "")
        return await self._woken(child, prompt, wait_ms, change)

    async def _woken(self, h: Handle, prompt: str, wait_ms: int, change: Change,
                     upgrade: bool = False) -> Woken:
        waiting = ResultWait(h, self.deps.clock, wait_ms) if wait_ms > 0 else None
        try:
            queued = await self.residency.wake(h, prompt, change, to_latest=upgrade)
        except BaseException:
            if waiting is not None:
                waiting.drop()
            raise
        return Woken(h.id, queued, waiting)

    async def wait(self, handle_id: str, timeout_ms: int = 0) -> TaskResult:
        h = await self._handle(handle_id)
        if settled_result(h) is not None:
            await self._log.barrier()  # report only what is on disk
            # a change refused meanwhile left memory ahead of the store: reload it first (UNAVAILABLE
            # while the store cannot be read — never a result that was not recorded)
            self.table.settle_restores()
            settled = settled_result(h)
            if settled is not None:
                return settled
        return await ResultWait(h, self.deps.clock, timeout_ms).result()

    async def resume(self, answer: Answer, handle_id: str = "", no_wait: bool = False,
                     accept_changed_definition: bool = False, upgrade: bool = False) -> ResumeOutcome:
        """Route ``answer`` by id, continue the leaf from its checkpoint, cascade up (docs/protocol.md §4).
        The handles run their own registry version; with ``upgrade`` (or ``accept_changed_definition``)
        they move to the latest, and a suspended tool that changed is refused unless accepted (§11)."""
        accepted, fut = await run_to_end(self._accept(answer, handle_id, no_wait, accept_changed_definition,
                                                      upgrade))
        top = accepted.chain[-1]
        if fut is None:
            return ResumeOutcome(top.id, None, accepted.duplicate)
        settled = settled_result(top) if accepted.duplicate else None
        try:
            result = settled if settled is not None else await asyncio.shield(fut)
        finally:
            top.live.drop(fut)
        return ResumeOutcome(top.id, result, accepted.duplicate)

    async def _accept(self, answer: Answer, handle_id: str, no_wait: bool, accept_changed_definition: bool,
                      upgrade: bool) -> tuple[resume_mod.Accepted, Waiter | None]:
        """Accept ``answer`` and launch the turns it continues, as one step that runs to its end: an
        answer made durable always has its turns running (``detached``). The waiter for the top
        handle is registered before the commit, so a settle that follows at once is not missed; if
        the caller left meanwhile, that settle drops it."""
        async with self._resume_lock:
            await self._log.barrier()  # a suspension still being committed is found, not NOT_FOUND
            # the entry accept reads, and the handles waiting on it if they are parked on disk, read
            # off the event loop; the entry again if loading them awaited (accept's get is fresh)
            entry = await self.requests.fetch(answer.id)
            if entry is not None and await self.fetch(*entry.pending(), handle_id):
                await self.requests.fetch(answer.id)
            accepted, change = resume_mod.accept(self, answer, handle_id, accept_changed_definition, upgrade)
            top = accepted.chain[-1]
            fut = None if no_wait else top.live.waiter()
            if change is not None:
                try:
                    await self.commit(change)
                except BaseException:  # refused: nobody will wait on this one
                    if fut is not None:
                        top.live.drop(fut)
                    raise
                for h in accepted.chain:
                    self.residency.launch(h)
        return accepted, fut

    async def settled(self) -> None:
        """Every change queued so far durable or refused (what ``durable`` waits for, without its
        checks): the engine's stop waits here."""
        await self._log.barrier()

    async def durable(self) -> None:
        """Wait until every change made so far is on disk (before reporting state to a client); the
        handles of a change refused meanwhile are reloaded from the store (``StoreUnavailable``
        while it cannot be read: never a state that was not recorded). In a cluster, UNAVAILABLE if
        this daemon gave the runtime up meanwhile: its memory may be older than what the next owner
        committed."""
        await self._log.barrier()
        if self.residency.retired:
            raise Unavailable(f"{self.residency.retired}; retry the call")
        self.table.settle_restores()

    def snapshot(self, handle_id: str) -> Handle:
        return self.table.handle(handle_id)

    def definition_changed(self, h: Handle) -> list[DefinitionChange]:
        """What changed, since ``h`` suspended, in what its answer will be fed to (docs/protocol.md §11)."""
        return drift.found(self, h)

    async def fetch_all(self) -> list[Handle]:
        """``list()``, with every handle, child list and registry version it names read first
        through ``Store.read`` (off the event loop on PostgreSQL)."""
        handles = (await self.table.walk())[1:]
        await self.fetch(*(h.id for h in handles))  # the versions they run
        return handles

    def list(self) -> list[Handle]:
        """Every handle in pre-order (spawn order within a parent), root excluded."""
        return self.table.preorder()[1:]

    async def post(self, handle_id: str, item: InboxItem) -> int:
        """Append an inbox item and return its 1-based place in the inbox; a full inbox rejects at
        once (docs/protocol.md §4 Inbox)."""
        h = await self._handle(handle_id)
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

    async def interrupt(self, handle_id: str) -> ending.Interrupted:
        """Runs to its end once started (``detached``): a turn it stopped is always settled."""
        return await run_to_end(ending.interrupt(self, await self._handle(handle_id)))

    async def close(self, handle_id: str) -> None:
        await run_to_end(ending.close(self, await self._handle(handle_id), "closed by request"))

    async def shutdown(self) -> None:
        await run_to_end(ending.shutdown(self))

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

    def publish_text(self, h: Handle, delta: str) -> None:
        """A streamed model delta: live only, never stored, so it takes no seq (docs/protocol.md §3)."""
        self.bus.publish([Event(seq=0, runtime_id=self.id, handle=h.id, type=EventType.TEXT,
                                at=rfc3339(self.deps.clock.now()), data={"delta": delta})])

    async def commit_record(self) -> None:
        """Persist the runtime record (after its registry was replaced), with the versions made
        since the last one."""
        await self.commit(Change(runtime=True))

    async def report_reattach(self, before: Mapping[str, AgentDef], before_llm: LlmConfig,
                              after: Mapping[str, AgentDef], after_llm: LlmConfig) -> int:
        """A ``reattach`` event on every suspended handle to which the registry ``after`` brought a
        difference from ``before`` (docs/protocol.md §11); the engine runs it after ``New``."""
        return await drift.report_reattach(self, before, before_llm, after, after_llm)

    # ------------------------------------------------------------------ turns

    async def settle_commits(self) -> None:
        for _ in range(SETTLE_ROUNDS):  # each round waits for a commit queued meanwhile
            await self._log.barrier()
            if self._log.settled:
                self._log.resync(self.deps.store.last_seq(self.id))
                return

    @property
    def retired(self) -> str:
        """Why this daemon gave the runtime up (empty while it serves it)."""
        return self.residency.retired

    @property
    def gone(self) -> asyncio.Event:
        """Set once this daemon gave the runtime up: streams and waits on it end."""
        return self.residency.gone

    def turn_of(self, h: Handle) -> asyncio.Task[None] | None:
        return self.residency.turn_of(h)


def stored_seqs(store: Store, runtime_id: str) -> tuple[int, int]:
    """The next event seq of a runtime and the first one still stored (the next when none is)."""
    next_seq = store.last_seq(runtime_id) + 1
    first = store.events(runtime_id, 0, 1)
    return next_seq, first[0].seq if first else next_seq


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
