"""Engine fixtures: the in-memory store, a scripted model and Python-function tools — no gRPC, no HTTP."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import pytest

from toolnexus_daemon.clock import ManualClock
from toolnexus_daemon.engine.verbs.engine import Engine
from toolnexus_daemon.engine.verbs.runtime import Runtime
from toolnexus_daemon.llm.base import ModelReply, ModelRequest, reply_from_openai
from toolnexus_daemon.model import (
    JSON,
    AgentDef,
    Answer,
    LlmConfig,
    LlmStyle,
    Request,
    RuntimeOptions,
    ToolResult,
    ToolSource,
)
from toolnexus_daemon.store import MemoryStore
from toolnexus_daemon.tools.base import ToolInvocation

Script = Callable[[JSON], JSON]


@dataclass
class ScriptedModel:
    """A ModelTransport answering from a function of the request body; records every body."""

    script: Script
    bodies: list[JSON] = field(default_factory=list)
    # when set, every call waits for it: a test that needs turns still running holds it
    gate: asyncio.Event | None = None

    async def complete(self, request: ModelRequest) -> ModelReply:
        self.bodies.append(request.body)
        await asyncio.sleep(0)
        if self.gate is not None:
            await self.gate.wait()
        return reply_from_openai(self.script(request.body))

    async def aclose(self) -> None:
        return None


@dataclass
class FunctionTools:
    """A ToolExecutor running Python functions ``fn(args, invocation) -> ToolResult``; logs each call."""

    functions: dict[str, Callable[[JSON, ToolInvocation], ToolResult | Awaitable[ToolResult]]] = field(
        default_factory=dict)
    ledger: list[ToolInvocation] = field(default_factory=list)

    async def invoke(self, inv: ToolInvocation) -> ToolResult:
        self.ledger.append(inv)
        await asyncio.sleep(0)
        result = self.functions[inv.tool.name](inv.arguments, inv)
        return await result if inspect.isawaitable(result) else result


@dataclass
class FunctionResolver:
    """A Resolver answering with ``answer_for(request)``; ``connected`` False means none is there."""

    answer_for: Callable[[Request], Answer | None] = lambda req: Answer(req.id, ok=True)
    connected: bool = True
    asked: list[Request] = field(default_factory=list)

    def available(self, runtime_id: str) -> bool:
        return self.connected

    async def resolve(self, runtime_id: str, handle: str, call_id: str, request: Request,
                      take_timeout_ms: int) -> Answer | None:
        self.asked.append(request)
        await asyncio.sleep(0)
        return self.answer_for(request)


@dataclass
class Bench:
    engine: Engine
    model: ScriptedModel
    tools: FunctionTools
    store: MemoryStore
    resolver: FunctionResolver
    clock: ManualClock


LLM = LlmConfig(style=LlmStyle.WORKER, model="scripted")


@pytest.fixture
async def bench() -> AsyncIterator[Bench]:
    model = ScriptedModel(script=lambda body: {})
    tools = FunctionTools()
    store = MemoryStore()
    resolver = FunctionResolver()
    clock = ManualClock()  # engine time moves only when a test advances it
    engine = Engine(store, clock=clock, model_for=lambda llm: model,
                    executors={ToolSource.NATIVE: tools}, resolver=resolver)
    await engine.start()
    yield Bench(engine, model, tools, store, resolver, clock)
    await engine.stop()


async def new_runtime(bench: Bench, rid: str, *agents: AgentDef, **options: int | bool) -> Runtime:
    """A fresh runtime on the bench's engine (style worker: the scripted model answers)."""
    out = await bench.engine.new(rid, list(agents), LLM, RuntimeOptions(**options))  # type: ignore[arg-type]
    return bench.engine.runtime(out.runtime_id)
