"""The benchmark's driver: the daemon through the shipped asyncio client, ``toolnexus_client.aio``.

What users run is what is measured: one ``aio.Runtime`` per ``Daemon`` (one
channel, one ``Connect`` worker stream opened by the client), serving the
model (``transport=``, style ``worker``) and the one native tool
(``secret_action``) as ``async def`` callables on the client's event loop, and
the cycle (Spawn, Wake, Wait → pending, Resume ok → done) as the client's
four verbs; the fused cycle is ``spawn(prompt=..., wait=...)`` then ``resume``.
The model is the reference mock (call the first tool, then answer with the
tool's output) with its replies built once, so model time is near zero; the
client converts each request and reply between protobuf and dicts, which is
part of what a user's cycle costs. Each verb is one unary RPC of the client, so
``rpcs`` counts them by method as the driver calls them; ``counters`` counts
the model and tool calls the worker served.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from toolnexus_client import (
    Context,
    HandleSnapshot,
    Info,
    Registry,
    TaskResult,
    Tool,
    ToolResult,
    Unavailable,
    agent,
)
from toolnexus_client import registry as client_registry
from toolnexus_client.aio import EventStream, Runtime

AGENT = "operator"
TOOL = "secret_action"
PROMPT = "please perform the secret action"
WAIT_S = 60.0  # a turn of the mock model settles in milliseconds: a minute means something is wrong


def _chat(message: dict[str, Any], usage: tuple[int, int, int]) -> dict[str, Any]:
    p, c, t = usage
    return {"id": "chatcmpl-bench", "object": "chat.completion", "model": "bench",
            "choices": [{"index": 0, "message": message,
                         "finish_reason": "tool_calls" if message.get("tool_calls") else "stop"}],
            "usage": {"prompt_tokens": p, "completion_tokens": c, "total_tokens": t}}


TOOL_CALL_REPLY = {"status": 200, "body": _chat(
    {"role": "assistant", "content": None,
     "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": TOOL, "arguments": "{}"}}]},
    (3, 2, 5))}
DONE_REPLY = {"status": 200, "body": _chat({"role": "assistant", "content": "action performed"}, (2, 1, 3))}
TEXT_REPLY = {"status": 200, "body": _chat({"role": "assistant", "content": "ok"}, (2, 1, 3))}


def mock_reply(body: Mapping[str, Any]) -> dict[str, Any]:
    """The reference mock model on a chat request."""
    if any(m.get("role") == "tool" for m in body.get("messages") or ()):
        return DONE_REPLY
    return TOOL_CALL_REPLY if body.get("tools") else TEXT_REPLY


@dataclass
class Counters:
    llm_calls: int = 0
    tool_calls: int = 0


def registry(*, with_tool: bool = True, name: str = AGENT, counters: Counters | None = None,
             serve: bool = True) -> Registry:
    """The benchmark's one agent; with the tool, ``secret_action`` suspends once, then is done.
    ``serve=False`` declares the tool without serving it (another worker does): the same registry."""
    seen = counters if counters is not None else Counters()

    async def secret_action(args: Mapping[str, Any], ctx: Context) -> ToolResult | str:
        seen.tool_calls += 1
        if ctx.answer is not None:
            return "action performed"
        return ToolResult.suspend(id=f"approve:{ctx.handle}", kind="approval", prompt="approve?")

    tools = [Tool(TOOL, description="an action that needs approval",
                  input_schema={"type": "object", "properties": {}},
                  execute=secret_action if serve else None)] if with_tool else []
    does = "performs actions that need authorization"
    return client_registry(agent(name, does=does, uses={"tools": tools}))


@dataclass
class Daemon:
    """One runtime on a daemon through the shipped asyncio client, with the worker it serves."""

    runtime: Runtime
    counters: Counters = field(default_factory=Counters)
    rpcs: dict[str, int] = field(default_factory=dict)  # unary RPCs made, by method name

    @property
    def runtime_id(self) -> str:
        return self.runtime.id

    @classmethod
    async def connect(cls, target: str, *, llm: Mapping[str, Any] | None = None,
                      with_tool: bool = True, options: Mapping[str, Any] | None = None,
                      runtime_id: str = "", worker: bool = True) -> Daemon:
        """A new runtime (or ``runtime_id`` reattached: the same registry makes no new version).
        ``worker``: the client serves the mock model and the tool; without it nothing is served
        here — ``llm`` (a model server's config) answers, or, left out, a worker elsewhere."""
        counters = Counters()

        async def transport(request: Mapping[str, Any]) -> dict[str, Any]:
            counters.llm_calls += 1
            return mock_reply(request["body"])

        reg = registry(with_tool=with_tool, counters=counters, serve=worker)
        model = None if worker else (llm or {"style": "worker"})
        runtime = await Runtime.new(target, registry=reg, transport=transport if worker else None, llm=model,
                                    options=options, runtime_id=runtime_id or None, connect_timeout=30.0)
        return cls(runtime, counters)

    async def close(self) -> None:
        await self.runtime.detach()

    # -------------------------------------------------------------- verbs

    def _counted(self, rpc: str) -> None:
        self.rpcs[rpc] = self.rpcs.get(rpc, 0) + 1

    async def spawn(self, agent_name: str = AGENT) -> str:
        self._counted("Spawn")
        return await self.runtime.spawn(self.runtime.root, agent_name)

    async def wake(self, handle: str, prompt: str = PROMPT) -> None:
        self._counted("Wake")
        await self.runtime.wake(handle, prompt)

    async def spawn_awake(self, agent_name: str = AGENT, prompt: str = PROMPT,
                          wait: float = WAIT_S) -> tuple[str, TaskResult]:
        """The fused Spawn: spawned and woken in one commit, answered with the settled result."""
        self._counted("Spawn")
        woken = await self.runtime.spawn(self.runtime.root, agent_name, prompt=prompt, wait=wait)
        if woken.result is None:
            raise RuntimeError(f"the fused spawn of {woken.handle} came back without a result")
        return woken.handle, woken.result

    async def wait(self, handle: str) -> TaskResult:
        self._counted("Wait")
        return await self.runtime.wait(handle, WAIT_S)

    async def resume(self, request_id: str) -> TaskResult:
        self._counted("Resume")
        out = await self.runtime.resume({"id": request_id, "ok": True})
        if out.result is None:
            raise RuntimeError(f"resume of {request_id} came back without a result")
        return out.result

    async def snapshot(self, handle: str) -> HandleSnapshot:
        self._counted("Snapshot")
        return await self.runtime.snapshot(handle)

    async def info(self) -> Info:
        return await self.runtime.info()

    def watch(self, types: list[str], handle: str | None = None) -> EventStream:
        return self.runtime.watch(0, types, handle)

    async def park(self) -> str:
        """Spawn, wake and wait until pending; returns the handle id (left suspended)."""
        h = await self.spawn()
        await self.wake(h)
        _expect(await self.wait(h), "pending")
        return h

    async def cycle(self, timings: dict[str, list[float]] | None = None) -> str:
        """One cycle; with ``timings`` each phase's seconds are appended under its name."""
        clock = time.perf_counter
        t0 = clock()
        h = await self.spawn()
        t1 = clock()
        await self.wake(h)
        t2 = clock()
        r = await self.wait(h)
        t3 = clock()
        pending = _expect(r, "pending").pending
        assert pending is not None
        out = await self.resume(pending.id)
        t4 = clock()
        _expect(out, "done", "action performed")
        if timings is not None:
            for name, dt in (("spawn", t1 - t0), ("wake", t2 - t1), ("wait_pending", t3 - t2),
                             ("resume_done", t4 - t3)):
                timings.setdefault(name, []).append(dt)
        return h

    async def fused_cycle(self, timings: dict[str, list[float]] | None = None) -> str:
        """The same cycle in two unary RPCs: Spawn with prompt and a wait (→ pending), Resume (→ done)."""
        clock = time.perf_counter
        t0 = clock()
        handle, result = await self.spawn_awake()
        t1 = clock()
        pending = _expect(result, "pending").pending
        assert pending is not None
        done = await self.resume(pending.id)
        t2 = clock()
        _expect(done, "done", "action performed")
        if timings is not None:
            for name, dt in (("spawn_wake_wait", t1 - t0), ("resume_done", t2 - t1)):
                timings.setdefault(name, []).append(dt)
        return handle


def _expect(result: TaskResult, status: str, text: str | None = None) -> TaskResult:
    """``result`` when it has ``status`` (and ``text``); a benchmark cycle that went wrong stops loudly."""
    if result.status != status or (text is not None and result.text != text):
        raise RuntimeError(f"expected {status}, got {result.status}: {result.text}")
    return result


async def run_concurrent(n_tasks: int, total: int, body: Callable[[int], Awaitable[object]]) -> float:
    """Run ``body(i)`` for i in range(total) on ``n_tasks`` tasks; returns elapsed seconds."""
    counter = itertools.count()

    async def lane() -> None:
        while (i := next(counter)) < total:
            await body(i)

    t0 = time.perf_counter()
    await asyncio.gather(*(lane() for _ in range(n_tasks)))
    return time.perf_counter() - t0


def is_unavailable(err: BaseException) -> bool:
    return isinstance(err, Unavailable)
