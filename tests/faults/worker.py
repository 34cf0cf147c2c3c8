"""A raw ``Connect`` worker for the chaos runs: every delivery executes, and is written to the ledger.

The Python client's worker deduplicates redelivered calls by ``call_id``,
which is what an app should do — and exactly what would hide a daemon that
re-dispatches a completed call. This worker does not deduplicate: each
ToolCall the daemon sends is one ledger entry. It reconnects on its own
whenever the stream breaks (the daemon was killed), saying hello again.

Tools: ``record`` returns a text naming its arguments; ``approve`` suspends
on ``ap:<handle>:<tag>`` until it is re-invoked with an answer (``ok`` →
``approved <tag>``); ``charge`` (an ``on_crash="ask"`` tool) returns ``charged <tag>``.
Each execution sleeps a few random milliseconds (``charge`` up to ten times longer) so
kills land while calls are in flight.
"""

from __future__ import annotations

import queue
import random
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import grpc
from google.protobuf import json_format

from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_daemon.api._gen import runtime_pb2_grpc as pb_grpc

from .agents import request_id
from .ledger import Execution, Ledger

RECONNECT_S = 0.05


class ChaosWorker:
    """Serves every native tool of one runtime until ``stop``; ``generation()`` says which daemon runs."""

    def __init__(self, target: str, runtime_id: str, ledger: Ledger, generation: Callable[[], int],
                 seed: int, max_delay_s: float = 0.02) -> None:
        self._target, self._rid = target, runtime_id
        self._ledger, self._generation = ledger, generation
        self._rng = random.Random(seed)
        self._rng_lock = threading.Lock()
        self._max_delay = max_delay_s
        self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix=f"chaos-tool-{runtime_id}")
        self._stop = threading.Event()
        self._call: grpc.Future | None = None
        self.welcomes = 0
        self.executions = 0
        self._thread = threading.Thread(target=self._run, name=f"chaos-worker-{runtime_id}", daemon=True)

    def start(self) -> ChaosWorker:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        call = self._call
        if call is not None:
            call.cancel()
        self._thread.join(10)  # the stream thread submits no more calls once stopping
        self._pool.shutdown(wait=True, cancel_futures=True)

    def _run(self) -> None:
        channel = grpc.insecure_channel(self._target, options=(("grpc.max_reconnect_backoff_ms", 200),))
        stub = pb_grpc.AgentRuntimeStub(channel)
        try:
            while not self._stop.is_set():
                try:
                    self._serve_once(stub)
                except grpc.RpcError:
                    pass  # the daemon went away; say hello again once it is back
                self._stop.wait(RECONNECT_S)
        finally:
            channel.close()

    def _serve_once(self, stub: pb_grpc.AgentRuntimeStub) -> None:
        outbox: queue.Queue[pb.WorkerMessage | None] = queue.Queue()
        hello = pb.WorkerHello(runtime_id=self._rid, worker_id=f"chaos-{self._rid}")
        outbox.put(pb.WorkerMessage(hello=hello))
        call = stub.Connect(_drain(outbox), wait_for_ready=True)
        self._call = call
        gen = -1
        try:
            for message in call:
                kind = message.WhichOneof("msg")
                if kind == "welcome":
                    # read only now: the stream waited for a daemon to be up, and the harness counts a
                    # generation before it starts the next daemon
                    gen = self._generation()
                    self.welcomes += 1
                elif kind == "tool_call" and not self._stop.is_set():
                    # a database restart counts a generation without breaking this stream: a call
                    # the daemon sends again after it is of the new one
                    now = max(gen, self._generation())
                    self._pool.submit(self._execute, message.tool_call, now, self.welcomes, outbox)
        finally:
            outbox.put(None)
            self._call = None

    def _execute(self, call: pb.ToolCall, gen: int, stream: int,
                 outbox: queue.Queue[pb.WorkerMessage | None]) -> None:
        args = json_format.MessageToDict(call.arguments)
        self._ledger.append(Execution(call.call_id, call.tool, call.handle, args, gen, stream))
        self.executions += 1
        with self._rng_lock:
            delay = self._rng.uniform(0, self._max_delay * (10 if call.tool == "charge" else 1))
        self._stop.wait(delay)
        outbox.put(pb.WorkerMessage(tool_outcome=outcome(call, args)))


def outcome(call: pb.ToolCall, args: dict[str, object]) -> pb.ToolOutcome:
    tag = str(args.get("tag", ""))
    if call.tool == "record":
        text = f"recorded {tag} s{_int(args, 'step')} i{_int(args, 'i')}"
        return pb.ToolOutcome(call_id=call.call_id, output=text)
    if call.tool == "charge":
        return pb.ToolOutcome(call_id=call.call_id, output=f"charged {tag}")
    if call.tool == "approve":
        if call.HasField("answer") and call.answer.ok:
            return pb.ToolOutcome(call_id=call.call_id, output=f"approved {tag}")
        pending = pb.Request(id=request_id(call.handle, tag), kind="approval", prompt=f"approve {tag}?")
        return pb.ToolOutcome(call_id=call.call_id, pending=pending)
    return pb.ToolOutcome(call_id=call.call_id, output=f"no tool {call.tool}", is_error=True)


def _drain(outbox: queue.Queue[pb.WorkerMessage | None]) -> Iterator[pb.WorkerMessage]:
    while (message := outbox.get()) is not None:
        yield message


def _int(args: dict[str, object], key: str) -> int:
    """Struct numbers arrive as floats."""
    value = args.get(key, 0)
    return int(value) if isinstance(value, int | float) else 0
