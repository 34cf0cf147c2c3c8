"""The engine: every runtime of the daemon, their creation, reattachment, recovery and shutdown.

The API layer talks to this module and to ``Runtime``; nothing here knows
gRPC. Model transports are built per runtime by the ``model_for`` factory the
composition root supplies (so ``openai``/``anthropic`` over httpx and
``worker`` over the hub stay outside the engine).
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import hmac
import logging
import secrets
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, replace
from typing import Any

from ...bounds import PeerLimits
from ...clock import Clock
from ...envexpand import EnvAllowList
from ...errors import (
    DaemonError,
    DataLoss,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    StoreError,
    StoreUnavailable,
)
from ...llm.base import ModelTransport
from ...model import JSON, ROOT_ID, AgentDef, Event, LlmConfig, McpServer, RuntimeOptions, ToolSource
from ...store.base import Fence, Store
from ...tools.base import Resolver, ToolExecutor, ToolLister
from ..commit.committer import AllowAll, CommitGuard, CommitStats, Committer
from ..commit.ownership import Elsewhere, LeaseGuard, Moved, Ownership
from ..definitions.validate import validate, validate_runtime_id
from ..definitions.versions import RegistryVersion
from ..expiry.scheduler import Deadlines
from ..state import answer_links
from ..state.handle_table import Stored, recovery_records
from ..state.held import DEFAULT_HELD_BYTES, HeldBudget
from ..turn.tracing import NOOP, Tracer
from .detached import run_to_end
from .inbox import Inbox
from .runtime import Runtime, RuntimeDeps, stored_seqs

log = logging.getLogger("toolnexus_daemon.engine")

# why a runtime's streams and calls end when this daemon's lease on it went stale
STALE = ("this daemon could not renew its lease on the runtime in time (its database did not answer, or it "
         "was paused); another daemon serves the runtime once the lease lapses")
# added to a retired transport's whole-call timeout before it is closed
RETIRE_SLACK_S = 5.0
# how long a stop waits for the commits already queued (``Engine._settle``)
STOP_SETTLE_S = 10.0

ModelFactory = Callable[[LlmConfig], ModelTransport]
Observer = Callable[[Runtime, list[Event]], None]


@dataclass(frozen=True)
class NewOutcome:
    runtime_id: str
    root: str
    reattached: bool
    version: RegistryVersion


class Engine:
    """Owns the runtimes; one per daemon."""

    def __init__(self, store: Store, *, clock: Clock, model_for: ModelFactory,
                 executors: Mapping[ToolSource, ToolExecutor], resolver: Resolver | None = None,
                 observer: Observer | None = None, limits: PeerLimits | None = None,
                 env_allow: EnvAllowList | None = None, ownership: Ownership | None = None,
                 tracer: Tracer = NOOP, tool_lister: ToolLister | None = None,
                 held_bytes: int = DEFAULT_HELD_BYTES) -> None:
        self.store = store
        # the pending inbox and the runtime list, read from the store's indexes (verbs/inbox.py)
        self.inbox = Inbox(store)
        # lists the tools of the MCP servers a New names (None: no MCP, in engine tests)
        self.tool_lister = tool_lister
        # the one commit path of every runtime: their changes share transactions (committer.py)
        self.committer = Committer(store)
        # a member of a cluster: runtimes are held by lease, one owner each (engine.ownership)
        self.ownership = ownership
        self._claiming: dict[str, asyncio.Lock] = {}
        # commits refused because another daemon had taken their runtime over (metrics)
        self.fenced_commits = 0
        # told the id of every runtime this daemon loses to another (the worker hub lets its
        # workers go, so they reconnect and are forwarded to the new owner)
        self.lost_listeners: list[Callable[[str], None]] = []
        self._forgetting: set[asyncio.Task[None]] = set()
        self.limits = limits or PeerLimits()
        self.tracer = tracer
        # None: no check (engine tests); the daemon always passes the operator's list
        self.env_allow = env_allow
        # what answer links start with; set by the composition root once the listener is bound
        self.answer_base = ""
        self.clock = clock
        self._model_for = model_for
        self._executors = executors
        self._resolver = resolver
        self._observer = observer
        self._runtimes: dict[str, Runtime] = {}
        # what all runtimes together hold of their committed records (``state.held``)
        self.held = HeldBudget(held_bytes)
        # runtimes whose records could not be read at start: id -> what the store said
        self._damaged: dict[str, str] = {}
        self._creating = asyncio.Lock()
        self.stopping = False
        # transports replaced by a reattach, closed once no call of theirs can still be in flight
        self._retiring: set[asyncio.Task[None]] = set()
        # after a New: the sweep of unused registry versions (docs/versions.md) and the ``reattach``
        # events of the suspended handles the new registry differs for (docs/protocol.md §11)
        self._sweeping: set[asyncio.Task[None]] = set()
        # declines the suspensions whose expires_at passed (docs/protocol.md §10)
        self.deadlines = Deadlines(store, clock, self._runtimes.get)

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> int:
        """Load every stored runtime and continue the handles that were running; returns that count.

        In a cluster nothing is loaded here: a runtime is taken when a call names it or when the
        membership's sweeper finds it without a live owner (``open``, ``adopt``)."""
        if self.ownership is not None:
            return 0
        recovered = 0
        for rid in await self.store.read(lambda store: store.runtime_ids()):
            try:
                rt = await self._load(rid)
            except StoreUnavailable:  # not damage: the start fails and is retried, nothing quarantined
                raise
            except StoreError as exc:
                # one damaged runtime must not keep the others from serving (no crash loop)
                self._damaged[rid] = str(exc)
                log.error("runtime cannot be loaded; it is quarantined",
                          extra={"runtime": rid, "error": str(exc)})
                continue
            if rt is None:
                continue
            self._runtimes[rid] = rt
            self.deadlines.track(rid)
            recovered += rt.residency.recover()
            await rt.residency.recover_queues()
        return recovered

    async def _load(self, rid: str, fence: Fence | None = None) -> Runtime | None:
        """The runtime ``rid`` as stored, with what its recovery needs; every record read in one
        ``Store.read`` (off the event loop on PostgreSQL: a take-over runs on a call's path)."""
        stored = await self.store.read(functools.partial(_stored, runtime_id=rid))
        if stored is None:
            return None
        rt = self._build(rid, stored.record, fence, stored.seqs)
        rt.residency.load(stored.recovering)
        return rt

    # ------------------------------------------------------------------ cluster

    async def open(self, runtime_id: str) -> Runtime:
        """The runtime a call names. In a cluster, one not held here is claimed: taken and recovered
        (exactly as at a start, for this runtime only) when no live daemon owns it, else ``Moved``
        naming its owner (UNAVAILABLE; the API layer forwards the call there)."""
        rt = self._runtimes.get(runtime_id)
        if rt is not None and self.ownership is not None:
            fence = _fence_of(rt)
            if fence is not None and not self.ownership.fresh(fence):
                self._stale(runtime_id, fence)  # no read of a state another daemon may have moved past
                rt = None
        if rt is not None or self.ownership is None or not runtime_id or runtime_id in self._damaged:
            return self.runtime(runtime_id)
        # a take-over runs to its end (``detached``): a lease taken and turns recovered halfway would
        # wait a lease for the sweeper, or leave queued wakes unstarted
        return await run_to_end(self._claim_and_open(runtime_id))

    async def _claim_and_open(self, runtime_id: str) -> Runtime:
        assert self.ownership is not None
        async with self._claiming.setdefault(runtime_id, asyncio.Lock()):
            rt = self._runtimes.get(runtime_id)
            if rt is not None:
                return rt
            if self.stopping:
                raise FailedPrecondition("the daemon is shutting down")
            claim = await self.ownership.claim(runtime_id)
            if isinstance(claim, Elsewhere):
                raise Moved(runtime_id, claim.owner, claim.address, claim.expires_at)
            adopted = await self._adopt(runtime_id, claim.fence)
            if adopted is None:
                await self.ownership.release(runtime_id)
                return self.runtime(runtime_id)  # NOT_FOUND or DATA_LOSS, as outside a cluster
            return adopted

    async def _adopt(self, rid: str, fence: Fence) -> Runtime | None:
        try:
            rt = await self._load(rid, fence)
        except StoreUnavailable:
            raise
        except StoreError as exc:
            self._damaged[rid] = str(exc)
            log.error("runtime cannot be loaded; it is quarantined",
                      extra={"runtime": rid, "error": str(exc)})
            return None
        if rt is None:
            return None
        self._runtimes[rid] = rt
        self.deadlines.track(rid)
        recovered = rt.residency.recover()
        await rt.residency.recover_queues()
        log.info("runtime taken over", extra={"runtime": rid, "epoch": fence.epoch, "recovered": recovered})
        return rt

    async def adopt(self, runtime_id: str) -> bool:
        """Take ``runtime_id`` if no live daemon owns it (the sweeper's call); True when taken."""
        if runtime_id in self._runtimes or self.stopping:
            return False
        try:
            await self.open(runtime_id)
        except (Moved, NotFound, DataLoss, FailedPrecondition):
            return False
        return True

    def lost(self, runtime_id: str, fence: Fence | None = None,
             why: str = "the runtime moved to another daemon of the cluster") -> None:
        """Another daemon owns ``runtime_id`` now (a fenced commit or a renewal said so): forget it
        here and never write for it again. Its watchers end UNAVAILABLE and reconnect.

        ``fence``: the tenure that heard of the loss. A commit of an earlier tenure can be refused
        after this daemon took the runtime back at a new epoch; that refusal must not forget the
        runtime now served here, whose lease stays held and renewed (nobody else would take it)."""
        current = self._runtimes.get(runtime_id)
        if current is None:
            return
        if fence is not None and _fence_of(current) != fence:
            log.info("a commit of an earlier tenure was refused; the runtime is served here at a newer "
                     "epoch and kept", extra={"runtime": runtime_id, "epoch": fence.epoch})
            return
        rt = self._runtimes.pop(runtime_id)
        log.warning("runtime lost to another daemon; forgotten here", extra={"runtime": runtime_id})
        self.deadlines.forget(runtime_id)
        rt.residency.retire(why)
        for listener in self.lost_listeners:
            listener(runtime_id)
        task = asyncio.get_running_loop().create_task(self._forget(rt))
        self._forgetting.add(task)
        task.add_done_callback(self._forgetting.discard)

    def lapsed(self, runtime_id: str) -> None:
        """This daemon's lease on ``runtime_id`` went stale and was given up (the membership's timer):
        forget the runtime as a lost one, telling its callers why."""
        self.lost(runtime_id, None, STALE)

    async def _forget(self, rt: Runtime) -> None:
        await rt.residency.stop()
        await rt.deps.model.aclose()
        await rt.aclose_models()

    async def stop(self) -> None:
        """Stop running turns without changing their state (they continue on the next start, or in
        a cluster on the daemon that takes each runtime: its lease is released once it is stopped)."""
        self.stopping = True
        await self.deadlines.stop()
        sweeping = list(self._sweeping)
        for task in sweeping:
            task.cancel()
        await asyncio.gather(*sweeping, return_exceptions=True)
        for rt in list(self._runtimes.values()):
            await rt.residency.stop()
        await self._settle(STOP_SETTLE_S)
        if self.ownership is not None:
            for rid in list(self._runtimes):
                try:
                    await self.ownership.release(rid)
                except StoreError as exc:  # it expires by itself; the next owner waits one lease
                    log.warning("lease not released", extra={"runtime": rid, "error": str(exc)})
        for rt in list(self._runtimes.values()):
            await rt.deps.model.aclose()
            await rt.aclose_models()
        retiring = list(self._retiring)
        for task in retiring:
            task.cancel()  # closes the retired transport now
        await asyncio.gather(*retiring, return_exceptions=True)

    async def _settle(self, timeout: float) -> None:
        """Every change queued so far durable (or refused) before the leases go and the store
        closes: a commit in flight when the daemon stops lands rather than being cut off with its
        connection (nothing acknowledged depends on it; the next start would find it either way).
        Bounded: a store that cannot be reached fails its commits by its own timeouts; this one is
        the stop's."""
        waits = [asyncio.ensure_future(rt.settled()) for rt in self._runtimes.values()]
        if not waits:
            return
        _, late = await asyncio.wait(waits, timeout=timeout)
        for wait in late:
            wait.cancel()
        if late:
            log.warning("stopping with commits still in flight", extra={"runtimes": len(late)})

    def _observe(self, rt: Runtime, events: list[Event]) -> None:
        """Every committed batch of events: a new deadline to the scheduler, then the observer."""
        self.deadlines.saw(rt.id, events)
        if self._observer is not None:
            self._observer(rt, events)

    def commit_stats(self) -> CommitStats:
        """Changes and write transactions so far: how well grouping is sharing syncs (metrics)."""
        return self.committer.stats()

    def _guard_for(self, fence: Fence | None) -> CommitGuard:
        """What a runtime's commits and actions are conditional on: its lease in a cluster, nothing
        outside one."""
        if fence is None or self.ownership is None:
            return AllowAll()
        return LeaseGuard(fence, lambda runtime_id: self._fenced(runtime_id, fence), self.ownership.fresh,
                          lambda runtime_id: self._stale(runtime_id, fence))

    def _stale(self, runtime_id: str, fence: Fence) -> None:
        """``fence``'s lease was not renewed in time: this process stops acting for the runtime (the
        renewal loop gives it up at the same moment; this is the check made just before acting)."""
        assert self.ownership is not None
        current = self._runtimes.get(runtime_id)
        if current is None or _fence_of(current) != fence:
            return
        log.warning("runtime lease not renewed in time; this daemon stops serving the runtime",
                    extra={"runtime": runtime_id, "epoch": fence.epoch})
        self.ownership.give_up(runtime_id)
        self.lost(runtime_id, fence, STALE)

    def _deps(self, llm: LlmConfig, fence: Fence | None) -> RuntimeDeps:
        return RuntimeDeps(store=self.store, clock=self.clock, model=self._model_for(llm),
                           executors=self._executors, committer=self.committer, resolver=self._resolver,
                           observer=self._observe, limits=self.limits, guard=self._guard_for(fence),
                           answer_base=self.answer_base, tracer=self.tracer, model_for=self._model_for,
                           held=self.held)

    def _fenced(self, runtime_id: str, fence: Fence) -> None:
        self.fenced_commits += 1
        self.lost(runtime_id, fence)

    def _build(self, rid: str, rec: JSON, fence: Fence | None = None,
               seqs: tuple[int, int] | None = None) -> Runtime:
        agents = [AgentDef.from_json(a) for a in rec.get("agents") or []]
        llm = LlmConfig.from_json(rec.get("llm"))
        options = RuntimeOptions.from_json(rec.get("options"))
        created_at = float(rec.get("created_at") or 0.0)
        meta = rec.get("version")
        # a runtime stored before versions: its registry is version 1, written with its next record
        version = (RegistryVersion.from_record({**meta, "agents": rec.get("agents"), "llm": rec.get("llm")})
                   if isinstance(meta, dict) else None)
        return Runtime(rid, agents, llm, options, self._deps(llm, fence), created_at=created_at,
                       key_digest=str(rec.get("key_digest") or ""), version=version,
                       version_stored=version is not None, seqs=seqs)

    # ------------------------------------------------------------------ verbs

    async def new(self, runtime_id: str, agents: list[AgentDef], llm: LlmConfig, options: RuntimeOptions,
                  runtime_key: str = "") -> NewOutcome:
        """Create a runtime, or reattach to ``runtime_id`` (registry replaced, handles kept). Runs to
        its end once started (``detached``): a runtime whose record is durable is always served."""
        return await run_to_end(self._new(runtime_id, agents, llm, options, runtime_key))

    async def _new(self, runtime_id: str, agents: list[AgentDef], llm: LlmConfig, options: RuntimeOptions,
                   runtime_key: str) -> NewOutcome:
        if self.stopping:
            raise FailedPrecondition("the daemon is shutting down")
        if runtime_id:
            validate_runtime_id(runtime_id)
        agents = await self._with_listed_tools(agents, llm, options)
        if not self.answer_base and answer_links.any_asks(agents, options):
            raise FailedPrecondition("answer_link needs a daemon that serves answer links: start it with "
                                     "--answers-listen HOST:PORT (docs/protocol.md §10), or drop answer_link")
        fence = None
        if self.ownership is not None:
            fresh = not runtime_id  # a new id: nothing stored to open, claim it straight away
            runtime_id = runtime_id or "rt-" + secrets.token_hex(8)
            fence = await self._claim_for_new(runtime_id, fresh)
        async with self._creating:
            if runtime_id in self._damaged:
                self.runtime(runtime_id)  # raises DATA_LOSS naming the damaged record
            existing = self._runtimes.get(runtime_id) if runtime_id else None
            if existing is not None:
                self.check_key(existing, runtime_key)
                await self._reattach(existing, agents, llm, options)
                self.deadlines.track(existing.id)  # an agent back in the registry can be declined again
                self._sweep(existing)
                return NewOutcome(existing.id, ROOT_ID, True, existing.latest)
            rid = runtime_id or "rt-" + secrets.token_hex(8)
            seqs = await self.store.read(functools.partial(stored_seqs, runtime_id=rid))  # off the loop
            rt = Runtime(rid, agents, llm, options, self._deps(llm, fence), created_at=self.clock.now(),
                         key_digest=_digest(runtime_key) if runtime_key else "", seqs=seqs)
            await rt.create_root()
            self._runtimes[rid] = rt
            return NewOutcome(rid, ROOT_ID, False, rt.latest)

    async def _with_listed_tools(self, agents: list[AgentDef], llm: LlmConfig,
                                 options: RuntimeOptions) -> list[AgentDef]:
        """Validate the registry, then add the tools its MCP servers list (docs/mcp.md); the listed
        tools are stored with the registry, so a restart needs no listing."""
        lister = self.tool_lister
        earlier = lister.problems(agents) if lister is not None else []
        validate(agents, llm, options, earlier=earlier, env_allow=self.env_allow)
        if not any(a.mcp_servers for a in agents):
            return agents
        if lister is None:
            raise FailedPrecondition("this daemon cannot list MCP servers: the mcp SDK is not installed "
                                     "(pip install -r requirements.txt installs it); drop mcp_servers")
        listed = await lister.expand(agents)
        validate(listed, llm, options)  # a listed name may collide with a tool of the caller's
        return listed

    def refresh_listed(self, affects: Callable[[McpServer], bool]) -> None:
        """A server's tools changed (``notifications/tools/list_changed``): list them again for
        every runtime here whose agents name a server ``affects`` picks, for later turns."""
        task = asyncio.create_task(self._refresh_listed(affects))
        self._retiring.add(task)
        task.add_done_callback(self._retiring.discard)

    async def _refresh_listed(self, affects: Callable[[McpServer], bool]) -> None:
        lister = self.tool_lister
        if lister is None or self.stopping:
            return
        for rt in list(self._runtimes.values()):
            agents = list(rt.agents.values())
            if not any(affects(s) for a in agents for s in a.mcp_servers):
                continue
            own = [replace(a, tools=tuple(t for t in a.tools if t.source is not ToolSource.MCP))
                   for a in agents]
            try:
                listed = await lister.expand(own)
                validate(listed, rt.llm, rt.options)
                async with self._creating:
                    await self._reattach(rt, listed, rt.llm, rt.options)
            except (DaemonError, StoreError) as exc:  # the listing stays as it was; a later change retries
                log.warning("mcp tools changed but could not be listed again",
                            extra={"runtime": rt.id, "error": str(exc)})

    async def _claim_for_new(self, runtime_id: str, fresh: bool) -> Fence | None:
        """In a cluster, ``New`` for ``runtime_id`` runs on its owner: an existing runtime is opened
        (taken over if need be; ``Moved`` when another daemon serves it), a new id is claimed."""
        assert self.ownership is not None
        if not fresh:
            try:
                await self.open(runtime_id)
                return None  # loaded here now: New reattaches
            except NotFound:
                pass
        claim = await self.ownership.claim(runtime_id)
        if isinstance(claim, Elsewhere):
            raise Moved(runtime_id, claim.owner, claim.address, claim.expires_at)
        return claim.fence

    async def _reattach(self, rt: Runtime, agents: list[AgentDef], llm: LlmConfig,
                        options: RuntimeOptions) -> None:
        """Replace the registry without failing model calls in flight: the same model config
        keeps its transport; a new one retires the old transport after the longest a call of it
        can still take (its whole-call timeout), instead of closing it under those calls."""
        old_model, old_llm, old_agents = rt.deps.model, rt.llm, rt.agents
        model = old_model if llm == old_llm else self._model_for(llm)
        rt.replace_registry(agents, llm, options, model)
        await rt.commit_record()
        self._report(rt, old_agents, old_llm)
        if model is not old_model:
            self._retire(old_model, old_llm.timeout_ms / 1000 + RETIRE_SLACK_S)

    def _report(self, rt: Runtime, before: Mapping[str, AgentDef], before_llm: LlmConfig) -> None:
        """The ``reattach`` events of a New, written in the background: a deploy answers at once at
        any number of parked handles (best effort: the events are a report)."""
        after, after_llm = dict(rt.agents), rt.llm

        async def report() -> None:
            try:
                await rt.report_reattach(before, before_llm, after, after_llm)
            except StoreError as exc:
                log.warning("reattach events not written", extra={"runtime": rt.id, "error": str(exc)})

        self._background(report())

    def _background(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self._sweeping.add(task)
        task.add_done_callback(self._sweeping.discard)

    async def settle_background(self) -> None:
        """Wait for the work a New left running (tests, and a clean stop)."""
        while self._sweeping:
            await asyncio.gather(*list(self._sweeping), return_exceptions=True)

    def _sweep(self, rt: Runtime) -> None:
        """Delete the registry versions nobody used for their grace, in the background (best effort:
        a failed sweep is logged; the next New sweeps again)."""
        async def sweep() -> None:
            try:
                gone = await rt.sweep_versions()
            except (StoreError, DataLoss) as exc:
                log.warning("unused registry versions not swept", extra={"runtime": rt.id, "error": str(exc)})
                return
            if gone:
                log.info("unused registry versions deleted", extra={"runtime": rt.id, "versions": gone})

        self._background(sweep())

    def _retire(self, model: ModelTransport, after_s: float) -> None:
        async def close_later() -> None:
            try:
                await asyncio.sleep(after_s)
            finally:
                await model.aclose()

        task = asyncio.create_task(close_later())
        self._retiring.add(task)
        task.add_done_callback(self._retiring.discard)

    def runtime(self, runtime_id: str) -> Runtime:
        """The runtime named ``runtime_id``; INVALID_ARGUMENT if empty, NOT_FOUND if unknown."""
        if not runtime_id:
            raise InvalidArgument("runtime_id is required (the id New returned)")
        rt = self._runtimes.get(runtime_id)
        if rt is None and runtime_id in self._damaged:
            raise DataLoss(f'runtime "{runtime_id}" could not be loaded: {self._damaged[runtime_id]}')
        if rt is None:
            raise NotFound(f'unknown runtime "{runtime_id[:128]}"; create it with New')
        return rt

    def holds(self, runtime_id: str) -> bool:
        """Whether ``runtime_id`` is loaded here (in a cluster: this daemon owns it)."""
        return runtime_id in self._runtimes

    def runtimes(self) -> list[Runtime]:
        return list(self._runtimes.values())

    @staticmethod
    def check_key(rt: Runtime, presented: str) -> None:
        """PERMISSION_DENIED unless ``presented`` matches the runtime's secret (when it has one)."""
        if rt.key_digest and not hmac.compare_digest(rt.key_digest, _digest(presented)):
            raise PermissionDenied(
                f'runtime "{rt.id}" is protected by a runtime key; send it as x-toolnexus-runtime-key')

    async def shutdown_runtime(self, runtime_id: str, purge: bool) -> None:
        """Close every handle leaf-first; with ``purge`` delete the runtime's records too. Runs to its
        end once started (``detached``), so a purge never stops halfway."""
        rt = self.runtime(runtime_id)
        await run_to_end(self._shutdown_runtime(rt, purge))

    async def _shutdown_runtime(self, rt: Runtime, purge: bool) -> None:
        await rt.shutdown()
        if purge:
            await rt.residency.stop()
            await rt.purge()  # through the commit path: fenced by the lease in a cluster
            self._runtimes.pop(rt.id, None)
            self.deadlines.forget(rt.id)
            await rt.deps.model.aclose()
            await rt.aclose_models()
            if self.ownership is not None:
                await self.ownership.release(rt.id)


@dataclass(frozen=True)
class _Stored:
    """What loading a runtime reads: its record, event seqs and the handles its recovery needs."""

    record: JSON
    seqs: tuple[int, int]
    recovering: list[Stored]


def _stored(store: Store, runtime_id: str) -> _Stored | None:
    rec = store.get_runtime(runtime_id)
    if rec is None:
        return None
    return _Stored(rec, stored_seqs(store, runtime_id), recovery_records(store, runtime_id))


def _fence_of(rt: Runtime) -> Fence | None:
    """The lease tenure ``rt``'s commits carry (None outside a cluster)."""
    guard = rt.deps.guard
    return guard.fence if isinstance(guard, LeaseGuard) else None


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()
