"""What the turn modules see of a runtime: narrow protocols, so no turn module imports the runtime.

The modules of ``turn/`` (``loop``, ``step``, ``suspend``, ``escalate``, ``task_tool``, ``budget``,
``spawn_wake``, ``ending``, ``drift``, ``upgrade``) and ``verbs/resume`` and ``verbs/event_stream``
are functions over these protocols. ``verbs.runtime.Runtime`` satisfies them structurally, and the
engine's import graph runs one way (verbs → turn → commit, expiry → state → definitions), which the
layers contract in pyproject.toml and ``tests/engine/test_import_graph.py`` keep true.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Protocol

from ...bounds import PeerLimits
from ...clock import Clock
from ...events import EventBus
from ...llm.base import ModelTransport
from ...model import AgentDef, Budget, LlmConfig, RuntimeOptions, TaskResult, ToolResult, ToolSource
from ...store.base import Store
from ...tools.base import Resolver, ToolExecutor
from ..commit.landing import Landing
from ..definitions.versions import RegistryVersion
from ..state.change import Change
from ..state.checkpoint import Call
from ..state.handle import Handle
from ..state.handle_table import HandleTable
from ..state.request_index import RequestIndex
from .tracing import Tracer


class ActGuard(Protocol):
    """Asked before every model and tool call (the ``CommitGuard``'s side that turns see)."""

    def act(self, runtime_id: str) -> None: ...


class Deps(Protocol):
    """The outside world a runtime talks to (``RuntimeDeps`` is the concrete record)."""

    @property
    def store(self) -> Store: ...
    @property
    def clock(self) -> Clock: ...
    @property
    def model(self) -> ModelTransport: ...
    @property
    def executors(self) -> Mapping[ToolSource, ToolExecutor]: ...
    @property
    def resolver(self) -> Resolver | None: ...
    @property
    def limits(self) -> PeerLimits: ...
    @property
    def answer_base(self) -> str: ...
    @property
    def guard(self) -> ActGuard: ...
    @property
    def tracer(self) -> Tracer: ...


class RuntimeContext(Protocol):
    """Everything a verb may use: the runtime's identity, registry, owners and the commit path."""

    @property
    def id(self) -> str: ...
    @property
    def options(self) -> RuntimeOptions: ...
    @property
    def agents(self) -> Mapping[str, AgentDef]: ...
    @property
    def llm(self) -> LlmConfig: ...
    @property
    def version(self) -> int:
        """The number of the runtime's latest registry version."""
    @property
    def deps(self) -> Deps: ...
    @property
    def table(self) -> HandleTable: ...
    @property
    def requests(self) -> RequestIndex: ...
    @property
    def bus(self) -> EventBus: ...
    @property
    def turn_gate(self) -> asyncio.Semaphore: ...

    async def commit(self, change: Change) -> None: ...
    def start_commit(self, change: Change) -> asyncio.Future[None]:
        """Queue ``change`` now (in order, as ``commit`` would) and return the future of its
        durability, for a caller that has something to do before it waits (``landing``)."""
    def agent_of(self, h: Handle) -> AgentDef: ...
    def registry(self, number: int) -> RegistryVersion: ...
    def registry_of(self, h: Handle) -> RegistryVersion: ...
    def llm_of(self, h: Handle) -> LlmConfig: ...
    def model_of(self, h: Handle) -> ModelTransport: ...
    def max_turns(self, h: Handle) -> int: ...
    def check_retained(self, after_seq: int) -> None: ...
    def publish_text(self, h: Handle, delta: str) -> None: ...
    def turn_of(self, h: Handle) -> asyncio.Task[None] | None:
        """The task running ``h``'s turn, while one runs (the residency's, by handle id)."""
    def launch(self, h: Handle, landing: Landing | None = None) -> None: ...
    def store_unreachable(self) -> None:
        """A turn could not commit (or record its end): the store is away. The runtime continues its
        turns from their checkpoints once it is back (``residency.heal``)."""
    async def settle_commits(self) -> None:
        """Return once every change queued so far landed or was refused, the event seqs caught up
        with the store (``StoreUnavailable`` while it cannot be read)."""
    async def spawn(self, parent_id: str, agent_name: str, budget: Budget | None = None,
                    task_key: str = "") -> Handle: ...
    async def wake(self, handle_id: str, prompt: str) -> bool: ...
    async def wait(self, handle_id: str, timeout_ms: int = 0) -> TaskResult: ...
    async def run_task(self, parent: Handle, call: Call) -> ToolResult: ...
