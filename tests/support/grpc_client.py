"""A real gRPC client for the daemon under test: channel, stub, registry builders and a worker.

Tests speak to the daemon only through the generated stubs, as an app would.
``Worker`` is a real ``Connect`` stream on its own thread: it answers tool
calls and model calls with Python functions, so worker-channel behaviour is
tested over the wire.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import grpc
from google.protobuf import json_format, struct_pb2

from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_daemon.api._gen import runtime_pb2_grpc as pb_grpc
from toolnexus_daemon.model import JSON

ToolFn = Callable[[pb.ToolCall], pb.ToolOutcome]
LlmFn = Callable[[JSON], JSON]


def open_stub(target: str) -> tuple[grpc.Channel, pb_grpc.AgentRuntimeStub]:
    """A ready channel and stub; fails fast if the daemon is not there."""
    channel = grpc.insecure_channel(target)
    grpc.channel_ready_future(channel).result(timeout=10)
    return channel, pb_grpc.AgentRuntimeStub(channel)


def struct(value: JSON) -> struct_pb2.Struct:
    out = struct_pb2.Struct()
    out.update(value)
    return out


def as_dict(value: struct_pb2.Struct) -> JSON:
    return json_format.MessageToDict(value)


def approval_agent(name: str, approval_url: str) -> pb.AgentDef:
    """An agent whose only tool is the demo approval webhook (it suspends until approved)."""
    tool = pb.ToolDef(name="approve", description="asks a human", source="webhook",
                      input_schema=struct({"type": "object", "properties": {}}),
                      http=pb.HttpConfig(url=approval_url))
    return pb.AgentDef(name=name, does="needs approval", soul="You act after approval.", tools=[tool])


def native_agent(name: str, tool: str) -> pb.AgentDef:
    return pb.AgentDef(name=name, does="uses a native tool", tools=[pb.ToolDef(name=tool, source="native")])


def openai_llm(base_url: str, *, retries: int = 0, timeout_ms: int = 5000) -> pb.LlmConfig:
    return pb.LlmConfig(style="openai", base_url=base_url, model="scripted", retries=retries,
                        timeout_ms=timeout_ms)


def code_of(call: Callable[[], Any]) -> tuple[grpc.StatusCode, str]:
    """Run ``call``, which must fail; its status code and details."""
    try:
        call()
    except grpc.RpcError as err:
        return err.code(), err.details() or ""
    raise AssertionError("the call succeeded but was expected to fail")


class Worker:
    """A Connect stream answering tool calls with ``tool`` and model calls with ``llm``."""

    def __init__(self, stub: pb_grpc.AgentRuntimeStub, runtime_id: str, *, tool: ToolFn | None = None,
                 llm: LlmFn | None = None, worker_id: str = "w1") -> None:
        self.received: list[pb.DaemonMessage] = []
        self.welcome: pb.Welcome | None = None
        self._tool, self._llm = tool, llm
        self._outgoing: queue.Queue[pb.WorkerMessage | None] = queue.Queue()
        hello = pb.WorkerHello(runtime_id=runtime_id, worker_id=worker_id, llm=llm is not None)
        self._outgoing.put(pb.WorkerMessage(hello=hello))
        self._call = stub.Connect(self._requests())
        self._welcomed = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()
        if not self._welcomed.wait(10):
            raise AssertionError("no Welcome from the daemon")

    def _requests(self) -> Iterator[pb.WorkerMessage]:
        while (msg := self._outgoing.get()) is not None:
            yield msg

    def _serve(self) -> None:
        try:
            for msg in self._call:
                self._handle(msg)
        except grpc.RpcError:
            pass  # closed by close() or by the daemon going away

    def _handle(self, msg: pb.DaemonMessage) -> None:
        kind = msg.WhichOneof("msg")
        if kind == "welcome":
            self.welcome = msg.welcome
            self._welcomed.set()
            return
        self.received.append(msg)
        if kind == "tool_call" and self._tool is not None:
            self._outgoing.put(pb.WorkerMessage(tool_outcome=self._tool(msg.tool_call)))
        elif kind == "llm_call" and self._llm is not None:
            body = self._llm(as_dict(msg.llm_call.body))
            reply = pb.LlmReply(call_id=msg.llm_call.call_id, status=200, body=struct(body))
            self._outgoing.put(pb.WorkerMessage(llm_reply=reply))

    def close(self) -> None:
        self._outgoing.put(None)
        self._call.cancel()
        self._thread.join(5)


def wait_until(predicate: Callable[[], bool], timeout: float = 10.0, interval: float = 0.02) -> None:
    """Poll ``predicate`` until it holds; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(interval)
