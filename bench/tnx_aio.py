"""A lean ``grpc.aio`` driver for the daemon: the benchmark's client and worker in one event loop.

The benchmark measures the daemon, not a client library, so this speaks the
generated stubs directly: one channel, one ``Connect`` worker stream that
serves the model (style ``worker``) and the one native tool, and the cycle
(Spawn, Wake, Wait → pending, Resume ok → done) as four unary calls. The
model is the reference mock (call the first tool, then answer with the tool's
output) with its two replies built once, so model time is near zero.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import grpc
from google.protobuf import struct_pb2
from grpc import aio

from toolnexus_client._gen import runtime_pb2 as pb
from toolnexus_client._gen import runtime_pb2_grpc as pb_grpc

AGENT = "operator"
TOOL = "secret_action"
PROMPT = "please perform the secret action"
CHANNEL_OPTIONS = (("grpc.max_receive_message_length", 64 << 20), ("grpc.max_send_message_length", 64 << 20))


def _struct(value: dict) -> struct_pb2.Struct:
    out = struct_pb2.Struct()
    out.update(value)
    return out


def _chat(message: dict, usage: tuple[int, int, int]) -> struct_pb2.Struct:
    p, c, t = usage
    return _struct({"id": "chatcmpl-bench", "object": "chat.completion", "model": "bench",
                    "choices": [{"index": 0, "message": message,
                                 "finish_reason": "tool_calls" if message.get("tool_calls") else "stop"}],
                    "usage": {"prompt_tokens": p, "completion_tokens": c, "total_tokens": t}})


TOOL_CALL_REPLY = _chat({"role": "assistant", "content": None,
                         "tool_calls": [{"id": "call_1", "type": "function",
                                         "function": {"name": TOOL, "arguments": "{}"}}]}, (3, 2, 5))
DONE_REPLY = _chat({"role": "assistant", "content": "action performed"}, (2, 1, 3))
TEXT_REPLY = _chat({"role": "assistant", "content": "ok"}, (2, 1, 3))


def registry(*, with_tool: bool = True, name: str = AGENT) -> list[pb.AgentDef]:
    tools = []
    if with_tool:
        tools = [pb.ToolDef(name=TOOL, description="an action that needs approval", source="native",
                            input_schema=_struct({"type": "object", "properties": {}}))]
    return [pb.AgentDef(name=name, does="performs actions that need authorization", model="inherit",
                        tools=tools)]


def _has_tool_message(body: struct_pb2.Struct) -> bool:
    msgs = body.fields.get("messages")
    if msgs is None:
        return False
    for m in msgs.list_value.values:
        role = m.struct_value.fields.get("role")
        if role is not None and role.string_value == "tool":
            return True
    return False


def _has_tools(body: struct_pb2.Struct) -> bool:
    tools = body.fields.get("tools")
    return tools is not None and len(tools.list_value.values) > 0


def mock_reply(body: struct_pb2.Struct) -> struct_pb2.Struct:
    """The reference mock model on a request Struct."""
    if _has_tool_message(body):
        return DONE_REPLY
    return TOOL_CALL_REPLY if _has_tools(body) else TEXT_REPLY


def tool_outcome(call: pb.ToolCall) -> pb.ToolOutcome:
    """secret_action: suspend on the first call, 'action performed' once answered."""
    if call.HasField("answer") and call.answer.id:
        return pb.ToolOutcome(call_id=call.call_id, output="action performed")
    req = pb.Request(id=f"approve:{call.handle}", kind="approval", prompt="approve?")
    return pb.ToolOutcome(call_id=call.call_id, output="approve?", pending=req)


@dataclass
class Counters:
    llm_calls: int = 0
    tool_calls: int = 0


@dataclass
class Worker:
    """One Connect stream serving the mock model and secret_action, replies inline (no thread hop)."""

    stub: pb_grpc.AgentRuntimeStub
    runtime_id: str
    counters: Counters = field(default_factory=Counters)
    _call: object = None
    _task: asyncio.Task | None = None
    _outbox: asyncio.Queue | None = None

    async def start(self, timeout: float = 30.0) -> None:
        self._outbox = asyncio.Queue()
        await self._outbox.put(pb.WorkerMessage(hello=pb.WorkerHello(
            runtime_id=self.runtime_id, worker_id=f"bench-{id(self):x}", llm=True)))
        welcomed = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._serve(welcomed))
        await asyncio.wait_for(welcomed, timeout)

    async def _requests(self):
        assert self._outbox is not None
        while True:
            item = await self._outbox.get()
            if item is None:
                return
            yield item

    async def _serve(self, welcomed: asyncio.Future) -> None:
        call = self.stub.Connect(self._requests())
        self._call = call
        outbox = self._outbox
        assert outbox is not None
        try:
            async for msg in call:
                kind = msg.WhichOneof("msg")
                if kind == "llm_call":
                    self.counters.llm_calls += 1
                    lc = msg.llm_call
                    outbox.put_nowait(pb.WorkerMessage(llm_reply=pb.LlmReply(
                        call_id=lc.call_id, status=200, body=mock_reply(lc.body))))
                elif kind == "tool_call":
                    self.counters.tool_calls += 1
                    outbox.put_nowait(pb.WorkerMessage(tool_outcome=tool_outcome(msg.tool_call)))
                elif kind == "welcome" and not welcomed.done():
                    welcomed.set_result(None)
        except (aio.AioRpcError, asyncio.CancelledError):
            pass
        finally:
            if not welcomed.done():
                welcomed.set_exception(RuntimeError("worker stream ended before Welcome"))

    async def stop(self) -> None:
        if self._outbox is not None:
            self._outbox.put_nowait(None)
        if self._call is not None:
            self._call.cancel()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)


@dataclass
class Daemon:
    """A channel to a daemon and one runtime on it with its worker."""

    channel: aio.Channel
    stub: pb_grpc.AgentRuntimeStub
    runtime_id: str
    worker: Worker | None

    @classmethod
    async def connect(cls, target: str, *, llm: pb.LlmConfig | None = None, agents=None,
                      options: pb.RuntimeOptions | None = None, runtime_id: str = "",
                      worker: bool = True, channel_options: tuple = CHANNEL_OPTIONS) -> Daemon:
        channel = aio.insecure_channel(target, options=channel_options)
        stub = pb_grpc.AgentRuntimeStub(channel)
        req = pb.NewRequest(runtime_id=runtime_id, agents=agents or registry(),
                            llm=llm or pb.LlmConfig(style="worker", model="bench"),
                            options=options or pb.RuntimeOptions())
        reply = await stub.New(req, timeout=60)
        w = None
        if worker:
            w = Worker(stub, reply.runtime_id)
            await w.start()
        return cls(channel, stub, reply.runtime_id, w)

    async def close(self) -> None:
        if self.worker is not None:
            await self.worker.stop()
        await self.channel.close()

    # -------------------------------------------------------------- verbs

    async def spawn(self, agent: str = AGENT) -> str:
        return (await self.stub.Spawn(pb.SpawnRequest(runtime_id=self.runtime_id, parent="root",
                                                      agent=agent), timeout=60)).handle

    async def wake(self, handle: str, prompt: str = PROMPT) -> None:
        await self.stub.Wake(pb.WakeRequest(runtime_id=self.runtime_id, handle=handle, prompt=prompt),
                             timeout=60)

    async def spawn_awake(self, agent: str = AGENT, prompt: str = PROMPT,
                          wait_ms: int = 60_000) -> pb.SpawnResponse:
        """The fused Spawn (issue 20): spawned and woken in one commit, answered with the settled result."""
        return await self.stub.Spawn(pb.SpawnRequest(runtime_id=self.runtime_id, parent="root", agent=agent,
                                                     prompt=prompt, wait_ms=wait_ms), timeout=90)

    async def wait(self, handle: str) -> pb.TaskResult:
        return await self.stub.Wait(pb.WaitRequest(runtime_id=self.runtime_id, handle=handle,
                                                   timeout_ms=60_000), timeout=90)

    async def resume(self, request_id: str) -> pb.ResumeResponse:
        return await self.stub.Resume(pb.ResumeRequest(runtime_id=self.runtime_id,
                                                       answer=pb.Answer(id=request_id, ok=True)), timeout=90)

    async def snapshot(self, handle: str) -> pb.HandleSnapshot:
        return await self.stub.Snapshot(pb.SnapshotRequest(runtime_id=self.runtime_id, handle=handle),
                                        timeout=30)

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
        _expect(r, "pending")
        out = await self.resume(r.pending.id)
        t4 = clock()
        _expect(out.result, "done", "action performed")
        if timings is not None:
            for name, dt in (("spawn", t1 - t0), ("wake", t2 - t1), ("wait_pending", t3 - t2),
                             ("resume_done", t4 - t3)):
                timings.setdefault(name, []).append(dt)
        return h


    async def fused_cycle(self, timings: dict[str, list[float]] | None = None) -> str:
        """The same cycle in two unary RPCs: Spawn with prompt and wait_ms (→ pending), Resume (→ done)."""
        clock = time.perf_counter
        t0 = clock()
        out = await self.spawn_awake()
        t1 = clock()
        r = _expect(out.result, "pending")
        done = await self.resume(r.pending.id)
        t2 = clock()
        _expect(done.result, "done", "action performed")
        if timings is not None:
            for name, dt in (("spawn_wake_wait", t1 - t0), ("resume_done", t2 - t1)):
                timings.setdefault(name, []).append(dt)
        return out.handle


def _expect(result: pb.TaskResult, status: str, text: str | None = None) -> pb.TaskResult:
    """``result`` when it has ``status`` (and ``text``); a benchmark cycle that went wrong stops loudly."""
    if result.status != status or (text is not None and result.text != text):
        raise RuntimeError(f"expected {status}, got {result.status}: {result.text}")
    return result


async def run_concurrent(n_tasks: int, total: int, body: Callable[[int], object]) -> float:
    """Run ``body(i)`` for i in range(total) on ``n_tasks`` tasks; returns elapsed seconds."""
    counter = itertools.count()

    async def lane() -> None:
        while (i := next(counter)) < total:
            await body(i)

    t0 = time.perf_counter()
    await asyncio.gather(*(lane() for _ in range(n_tasks)))
    return time.perf_counter() - t0


def is_unavailable(err: BaseException) -> bool:
    return isinstance(err, aio.AioRpcError) and err.code() == grpc.StatusCode.UNAVAILABLE
