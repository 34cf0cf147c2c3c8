"""The background worker stream: one ``Connect`` per runtime, kept open until the runtime detaches.

A daemon thread opens the stream, sends ``WorkerHello``, waits for ``Welcome``
and then hands every call to the ``Dispatcher``; replies go back through a
per-connection outbox queue that feeds the request iterator. When the stream
breaks (the daemon restarted, or was killed), it reconnects with capped,
jittered exponential backoff and says hello again; the daemon redelivers the
calls it lost with the same call_id, which the dispatcher deduplicates.
Before the first Welcome a refusal that retrying cannot fix (bad runtime id,
bad credentials, no Connect at all) is reported to ``start`` instead.
"""

from __future__ import annotations

import logging
import queue
import random
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from typing import Any

import grpc

from ._dispatch import Dispatcher
from ._gen import runtime_pb2 as pb
from ._gen import runtime_pb2_grpc as pb_grpc
from .errors import ToolnexusError, Unavailable, from_rpc_error

log = logging.getLogger("toolnexus_client")

FATAL_BEFORE_WELCOME = frozenset({
    grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND, grpc.StatusCode.PERMISSION_DENIED,
    grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.UNIMPLEMENTED, grpc.StatusCode.FAILED_PRECONDITION,
})

_CLOSE = object()


def _drain(outbox: queue.Queue[Any]) -> Iterator[pb.WorkerMessage]:
    """The request iterator of one connection: what is put into its outbox, until _CLOSE."""
    while True:
        item = outbox.get()
        if item is _CLOSE:
            return
        yield item


class WorkerStream:
    """Serves one runtime's calls over Connect in a background thread, reconnecting as needed."""

    def __init__(self, channel: grpc.Channel, hello: pb.WorkerHello, dispatcher: Dispatcher,
                 metadata: Sequence[tuple[str, str]] = (),
                 backoff: tuple[float, float] = (0.05, 2.0)) -> None:
        self._stub = pb_grpc.AgentRuntimeStub(channel)
        self.hello = hello
        self._dispatcher = dispatcher
        self._metadata = tuple(metadata)
        self._backoff = backoff
        self._stop = threading.Event()
        self._state = threading.Condition()
        self._welcomes = 0
        self._failure: ToolnexusError | None = None
        self._call: Any = None
        self._thread = threading.Thread(target=self._run, name=f"toolnexus-worker-{hello.worker_id}",
                                        daemon=True)

    @property
    def welcomes(self) -> int:
        """How many times the daemon welcomed this worker (1 + reconnections)."""
        with self._state:
            return self._welcomes

    def start(self, timeout: float) -> None:
        """Start serving; return once welcomed, raise the refusal or Unavailable after ``timeout``."""
        self._thread.start()
        try:
            self.wait_welcomed(1, timeout)
        except ToolnexusError:
            self.stop()
            raise

    def wait_welcomed(self, count: int, timeout: float) -> None:
        """Block until the daemon has welcomed this worker ``count`` times in total."""
        with self._state:
            done = self._state.wait_for(lambda: self._welcomes >= count or self._failure is not None, timeout)
            if self._failure is not None:
                raise self._failure
        if not done:
            raise Unavailable("UNAVAILABLE", f"worker stream got no Welcome within {timeout:g}s")

    def reconnect(self) -> None:
        """Drop the current stream; the worker says hello again and the daemon re-sends what it lost."""
        call = self._call
        if call is not None:
            call.cancel()

    def stop(self, timeout: float = 5.0) -> None:
        """Close the stream and end the thread; calls still running are abandoned (redelivered elsewhere)."""
        self._stop.set()
        call = self._call
        if call is not None:
            call.cancel()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout)
        self._dispatcher.close()

    def _run(self) -> None:
        delay = self._backoff[0]
        while not self._stop.is_set():
            welcomed_before = self.welcomes
            try:
                self._serve_once()
            except grpc.RpcError as err:
                if self._is_fatal(err):
                    return
                log.info("worker stream %s broke: %s", self.hello.worker_id, from_rpc_error(err))
            if self.welcomes > welcomed_before:
                delay = self._backoff[0]
            self._stop.wait(delay * random.uniform(0.5, 1.0))
            delay = min(delay * 2, self._backoff[1])

    def _is_fatal(self, err: grpc.RpcError) -> bool:
        if self._stop.is_set():
            return True
        code = err.code() if callable(getattr(err, "code", None)) else None
        if self.welcomes == 0 and code in FATAL_BEFORE_WELCOME:
            with self._state:
                self._failure = from_rpc_error(err)
                self._state.notify_all()
            return True
        return False

    def _serve_once(self) -> None:
        outbox: queue.Queue[Any] = queue.Queue()
        outbox.put(pb.WorkerMessage(hello=self.hello))
        call = self._stub.Connect(_drain(outbox), metadata=self._metadata)
        self._call = call
        if self._stop.is_set():
            call.cancel()
        try:
            for message in call:
                self._on_message(message, outbox)
        finally:
            outbox.put(_CLOSE)
            self._call = None

    def _on_message(self, message: pb.DaemonMessage, outbox: queue.Queue[Any]) -> None:
        if message.WhichOneof("msg") == "welcome":
            with self._state:
                self._welcomes += 1
                self._state.notify_all()
            return
        future = self._dispatcher.submit(message)
        if future is not None:
            future.add_done_callback(lambda done: _post_reply(done, outbox))


def _post_reply(done: Future[pb.WorkerMessage], outbox: queue.Queue[Any]) -> None:
    """Queue a finished call's reply on the connection it arrived on (a dead one drops it harmlessly)."""
    if done.cancelled():
        return
    error = done.exception()
    if error is not None:
        log.error("worker call failed unexpectedly: %r", error)
        return
    outbox.put(done.result())
