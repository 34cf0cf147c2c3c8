"""What the turn modules see of a runtime: one small role protocol per consumer, so no turn module
imports the runtime and none depends on a member it does not use.

Each protocol below names its consumer and holds exactly the members that consumer uses, with the
roles of the functions it calls folded in by inheritance (a step runs the task tool, which runs the
ending, so ``Stepping`` extends ``Delegating``, which extends ``Ending``). ``verbs.runtime.Runtime``
satisfies them all structurally; the residency's own role (``verbs.residency.Resident``) adds what
it needs to run turns and free their slots. Starting a turn is not among them: the residency is the
one place a turn is launched, and what follows a turn's end (its slot freed, the next queued wake
launched) runs there too, so no turn module calls back into the runtime to start one.

The engine's import graph runs one way (verbs → turn → commit, expiry → state → definitions), which
the layers contract in pyproject.toml and ``tests/engine/test_import_graph.py`` keep true.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Protocol

from ...bounds import PeerLimits
from ...clock import Clock
from ...events import EventBus
from ...llm.base import ModelTransport
from ...model import AgentDef, Budget, LlmConfig, RuntimeOptions, TaskResult, ToolSource
from ...store.base import Store
from ...tools.base import Resolver, ToolExecutor
from ..definitions.versions import RegistryVersion
from ..state.change import Change
from ..state.handle import Handle
from ..state.handle_table import HandleTable
from ..state.request_index import RequestIndex
from .tracing import Tracer


class ActGuard(Protocol):
    """Asked before every model and tool call (the ``CommitGuard``'s side that turns see)."""

    def act(self, runtime_id: str) -> None: ...


# ---------------------------------------------------------------- the outside world, by what is used
# (``RuntimeDeps`` is the concrete record; no role sees the model transport there, only ``model_of``)


class ClockDeps(Protocol):
    @property
    def clock(self) -> Clock: ...


class StoreDeps(Protocol):
    @property
    def store(self) -> Store: ...


class TracerDeps(Protocol):
    @property
    def tracer(self) -> Tracer: ...


class LimitsDeps(Protocol):
    """What a peer's reply or result may carry before it is committed."""

    @property
    def limits(self) -> PeerLimits: ...


class SuspendDeps(ClockDeps, Protocol):
    @property
    def answer_base(self) -> str: ...


class EscalateDeps(ClockDeps, Protocol):
    @property
    def resolver(self) -> Resolver | None: ...


class StepDeps(SuspendDeps, EscalateDeps, TracerDeps, LimitsDeps, Protocol):
    """A step's tool calls: the executors, and the guard asked before each call leaves."""

    @property
    def executors(self) -> Mapping[ToolSource, ToolExecutor]: ...
    @property
    def guard(self) -> ActGuard: ...


class TurnDeps(StepDeps, StoreDeps, Protocol):
    """A turn: its steps', and the store it reads the transcript from."""


# ---------------------------------------------------------------- leaves: read what a handle runs


class Limits(Protocol):
    """``budget``: a handle's line and the clock its time limits are measured on."""

    @property
    def deps(self) -> ClockDeps: ...
    @property
    def table(self) -> HandleTable: ...


class Checked(Protocol):
    """``uncertain``: a call's tool definition and what a peer's result may carry."""

    @property
    def deps(self) -> LimitsDeps: ...
    def agent_of(self, h: Handle) -> AgentDef: ...


class Traced(Protocol):
    """``spans``: the runtime's id, the tracer and the LLM a handle's version runs."""

    @property
    def id(self) -> str: ...
    @property
    def deps(self) -> TracerDeps: ...
    def registry_of(self, h: Handle) -> RegistryVersion: ...
    def llm_of(self, h: Handle) -> LlmConfig: ...


class Versions(Protocol):
    """``upgrade``: the latest registry version and the version each handle of a subtree runs."""

    @property
    def options(self) -> RuntimeOptions: ...
    @property
    def version(self) -> int:
        """The number of the runtime's latest registry version."""
    @property
    def table(self) -> HandleTable: ...
    def registry(self, number: int) -> RegistryVersion: ...
    def registry_of(self, h: Handle) -> RegistryVersion: ...


class Pinned(Protocol):
    """``drift.record``: what a suspension's fingerprint is taken of (the handle's own version)."""

    def agent_of(self, h: Handle) -> AgentDef: ...
    def llm_of(self, h: Handle) -> LlmConfig: ...


class Latest(Protocol):
    """``drift.found``, ``drift.check_resume``: the latest definitions an answer will be fed to."""

    @property
    def agents(self) -> Mapping[str, AgentDef]: ...
    @property
    def llm(self) -> LlmConfig: ...


class Announcing(Protocol):
    """``step.announce``: the call ids of a step and the ancestors whose records it touches."""

    @property
    def id(self) -> str: ...
    @property
    def table(self) -> HandleTable: ...


# ---------------------------------------------------------------- the ones that commit


class Reattaching(Protocol):
    """``drift.report_reattach``: the handles in memory and on disk whose definitions changed."""

    @property
    def id(self) -> str: ...
    @property
    def deps(self) -> StoreDeps: ...
    @property
    def table(self) -> HandleTable: ...
    async def commit(self, change: Change) -> None: ...


class Ending(Protocol):
    """``ending`` (Interrupt, Close, Shutdown): the turn task to stop, the request to cancel."""

    @property
    def options(self) -> RuntimeOptions: ...
    @property
    def deps(self) -> ClockDeps: ...
    @property
    def table(self) -> HandleTable: ...
    @property
    def requests(self) -> RequestIndex: ...
    async def commit(self, change: Change) -> None: ...
    def turn_of(self, h: Handle) -> asyncio.Task[None] | None:
        """The task running ``h``'s turn, while one runs (the residency's, by handle id)."""


class Suspending(Pinned, Protocol):
    """``suspend``: the request opened, its answer link, the commit that makes it durable."""

    @property
    def id(self) -> str: ...
    @property
    def options(self) -> RuntimeOptions: ...
    @property
    def deps(self) -> SuspendDeps: ...
    @property
    def requests(self) -> RequestIndex: ...
    async def commit(self, change: Change) -> None: ...


class Escalating(Protocol):
    """``escalate``: who may answer inline, and the flips to escalating and back."""

    @property
    def id(self) -> str: ...
    @property
    def options(self) -> RuntimeOptions: ...
    @property
    def deps(self) -> EscalateDeps: ...
    @property
    def table(self) -> HandleTable: ...
    async def commit(self, change: Change) -> None: ...
    def agent_of(self, h: Handle) -> AgentDef: ...
    def registry_of(self, h: Handle) -> RegistryVersion: ...


class Delegating(Ending, Protocol):
    """``task_tool``: a team member spawned, woken and waited for through the runtime's verbs (the
    task tool is a client of the runtime run from inside a turn), and closed once settled."""

    def agent_of(self, h: Handle) -> AgentDef: ...
    async def spawn(self, parent_id: str, agent_name: str, budget: Budget | None = None,
                    task_key: str = "") -> Handle: ...
    async def wake(self, handle_id: str, prompt: str) -> bool: ...
    async def wait(self, handle_id: str, timeout_ms: int = 0) -> TaskResult: ...


class Stepping(Delegating, Suspending, Escalating, Traced, Checked, Announcing, Protocol):
    """``step``: a step's tool calls, run on the version the handle runs."""

    @property
    def deps(self) -> StepDeps: ...
    @property
    def version(self) -> int: ...


class Turn(Stepping, Limits, Protocol):
    """``loop``: a turn — its model calls (the runtime's slots, the transport of the handle's
    version, streamed text) and its steps, committing as it goes."""

    def start_commit(self, change: Change) -> asyncio.Future[None]:
        """Queue ``change`` now (in order, as ``commit`` would) and return the future of its
        durability, for a caller that has something to do before it waits (``landing``)."""
    def model_of(self, h: Handle) -> ModelTransport: ...
    def publish_text(self, h: Handle, delta: str) -> None: ...
    @property
    def turn_gate(self) -> asyncio.Semaphore: ...
    @property
    def deps(self) -> TurnDeps: ...


class Spawning(Limits, Versions, Protocol):
    """``spawn_wake``: a child made under its parent's version and budget, a wake started or
    queued behind the parent's running children (launching the turn is the residency's)."""

    async def commit(self, change: Change) -> None: ...
    def start_commit(self, change: Change) -> asyncio.Future[None]: ...
    def agent_of(self, h: Handle) -> AgentDef: ...


class Accepting(Versions, Latest, Announcing, Protocol):
    """``verbs.resume.accept``: the request an answer routes to and the chain it restarts."""

    @property
    def deps(self) -> ClockDeps: ...
    @property
    def requests(self) -> RequestIndex: ...
    def agent_of(self, h: Handle) -> AgentDef: ...


class Watched(Protocol):
    """``verbs.event_stream``: the stored events replayed, then the live bus."""

    @property
    def id(self) -> str: ...
    @property
    def deps(self) -> StoreDeps: ...
    @property
    def bus(self) -> EventBus: ...
    def check_retained(self, after_seq: int) -> None: ...
