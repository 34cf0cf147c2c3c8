"""Fixtures of the client tests: a real daemon subprocess, and a fake AgentRuntime server.

``daemon`` is the real daemon on 127.0.0.1:0 with LMDB under a tmp dir, shared
by the tests of one module (each test makes its own runtime). The fake server
tests the worker stream's connection logic without the daemon; it implements
only what that logic needs (New, Connect, Watch) and is scripted through
queues: ``calls`` feeds the connected worker (``DROP`` ends the stream, as a
restarting daemon would), ``hellos`` and ``replies`` record what the worker
sent, ``metadata`` what each call carried.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc
import pytest

from tests.support.daemon import DaemonProcess
from toolnexus_client._gen import runtime_pb2 as pb
from toolnexus_client._gen import runtime_pb2_grpc as pb_grpc

DROP = object()


class FakeDaemon(pb_grpc.AgentRuntimeServicer):
    def __init__(self) -> None:
        self.hellos: queue.Queue[pb.WorkerHello] = queue.Queue()
        self.replies: queue.Queue[pb.WorkerMessage] = queue.Queue()
        self.calls: queue.Queue[Any] = queue.Queue()
        self.metadata: list[tuple[str, dict[str, str]]] = []
        self.events: list[pb.Event] = []
        self.new_error: tuple[grpc.StatusCode, str] | None = None
        self.connect_error: tuple[grpc.StatusCode, str] | None = None
        self.welcome = True
        # Connect streams being served: a stream the worker cancelled is served on until its
        # handler sees it (up to 50 ms), and a call put meanwhile could go to that dead stream
        self.open_streams = 0
        self._lock = threading.Lock()

    def _record(self, name: str, context: grpc.ServicerContext) -> None:
        self.metadata.append((name, {k: v for k, v in context.invocation_metadata()}))

    def New(self, request: pb.NewRequest, context: grpc.ServicerContext) -> pb.NewResponse:
        self._record("New", context)
        if self.new_error:
            context.abort(*self.new_error)
        return pb.NewResponse(runtime_id=request.runtime_id or "rt-1", root="root",
                              reattached=bool(request.runtime_id))

    def Connect(self, request_iterator: Iterator[pb.WorkerMessage],
                context: grpc.ServicerContext) -> Iterator[pb.DaemonMessage]:
        self._record("Connect", context)
        if self.connect_error:
            context.abort(*self.connect_error)
        with self._lock:
            self.open_streams += 1
        try:
            hello = next(request_iterator).hello
            self.hellos.put(hello)
            threading.Thread(target=self._collect, args=(request_iterator,), daemon=True).start()
            if self.welcome:
                yield pb.DaemonMessage(welcome=pb.Welcome(worker_id=hello.worker_id,
                                                          runtime_id=hello.runtime_id))
            while context.is_active():
                try:
                    item = self.calls.get(timeout=0.05)
                except queue.Empty:
                    continue
                if item is DROP:
                    return
                yield item
        finally:
            with self._lock:
                self.open_streams -= 1

    def _collect(self, request_iterator: Iterator[pb.WorkerMessage]) -> None:
        try:
            for message in request_iterator:
                self.replies.put(message)
        except grpc.RpcError:
            pass  # the stream ended

    def Watch(self, request: pb.WatchRequest, context: grpc.ServicerContext) -> Iterator[pb.Event]:
        self._record("Watch", context)
        for event in self.events:
            if event.seq > request.after_seq:
                yield event
        ended = threading.Event()
        if context.add_callback(ended.set):
            ended.wait()  # follow "live": nothing more comes until the client cancels


@pytest.fixture
def fake() -> Iterator[tuple[FakeDaemon, str]]:
    """A running fake daemon and its target."""
    daemon = FakeDaemon()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
    pb_grpc.add_AgentRuntimeServicer_to_server(daemon, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield daemon, f"127.0.0.1:{port}"
    finally:
        server.stop(0)


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    """The real daemon serving on 127.0.0.1:<free port> with a fresh data dir; stopped after the module."""
    proc = DaemonProcess(tmp_path_factory.mktemp("client") / "data").start()
    try:
        yield proc
    finally:
        proc.stop()
