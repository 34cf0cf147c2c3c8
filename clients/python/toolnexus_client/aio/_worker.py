"""The worker stream: one ``Connect`` per runtime, served by a task on the event loop.

The one implementation of the client's worker (the blocking client runs this one
on its own loop, ``toolnexus_client._loop``). A task opens the stream, sends
``WorkerHello``, waits for ``Welcome`` and then hands every call to the
``Dispatcher``, whose call task writes its reply on the stream itself (one
write at a time). When the stream breaks (the daemon restarted,
or was killed), it reconnects with capped, jittered exponential backoff and
says hello again; the daemon redelivers the calls it lost with the same
call_id, which the dispatcher deduplicates. Before the first Welcome a refusal
that retrying cannot fix (bad runtime id, bad credentials, no Connect at all)
is reported to ``start`` instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Sequence
from typing import Any

import grpc
import grpc.aio

from .._gen import runtime_pb2 as pb
from .._gen import runtime_pb2_grpc as pb_grpc
from ..errors import ToolnexusError, Unavailable, from_rpc_error
from ._dispatch import Dispatcher

log = logging.getLogger("toolnexus_client")

FATAL_BEFORE_WELCOME = frozenset({
    grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND, grpc.StatusCode.PERMISSION_DENIED,
    grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.UNIMPLEMENTED, grpc.StatusCode.FAILED_PRECONDITION,
})


class WorkerStream:
    """Serves one runtime's calls over Connect in an event-loop task, reconnecting as needed."""

    def __init__(self, channel: grpc.aio.Channel, hello: pb.WorkerHello, dispatcher: Dispatcher,
                 metadata: Sequence[tuple[str, str]] = (),
                 backoff: tuple[float, float] = (0.05, 2.0)) -> None:
        self._stub = pb_grpc.AgentRuntimeStub(channel)
        self.hello = hello
        self._dispatcher = dispatcher
        self._metadata = tuple(metadata)
        self._backoff = backoff
        self._stop = asyncio.Event()
        self._state = asyncio.Condition()
        self.welcomes = 0
        self._failure: ToolnexusError | None = None
        self._call: Any = None
        self._task: asyncio.Task[None] | None = None

    async def start(self, timeout: float) -> None:
        """Start serving; return once welcomed, raise the refusal or Unavailable after ``timeout``."""
        self._task = asyncio.create_task(self._run(), name=f"toolnexus-worker-{self.hello.worker_id}")
        try:
            await self.wait_welcomed(1, timeout)
        except ToolnexusError:
            await self.stop()
            raise

    async def wait_welcomed(self, count: int, timeout: float) -> None:
        """Wait until the daemon has welcomed this worker ``count`` times in total."""
        async with self._state:
            try:
                await asyncio.wait_for(self._state.wait_for(
                    lambda: self.welcomes >= count or self._failure is not None), timeout)
            except TimeoutError:
                message = f"worker stream got no Welcome within {timeout:g}s"
                raise Unavailable("UNAVAILABLE", message) from None
            if self._failure is not None:
                raise self._failure

    def reconnect(self) -> None:
        """Drop the current stream; the worker says hello again and the daemon re-sends what it lost."""
        if self._call is not None:
            self._call.cancel()

    async def stop(self) -> None:
        """Close the stream and end the task; calls still running are cancelled (redelivered elsewhere)."""
        self._stop.set()
        if self._call is not None:
            self._call.cancel()
        if self._task is not None and self._task is not asyncio.current_task():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self._dispatcher.close()

    async def _run(self) -> None:
        delay = self._backoff[0]
        while not self._stop.is_set():
            welcomed_before = self.welcomes
            try:
                await self._serve_once()
            except asyncio.CancelledError:
                if self._stop.is_set() or _cancelling():
                    return
                # our own reconnect() cancelled the call: say hello again
            except grpc.RpcError as err:
                if await self._is_fatal(err):
                    return
                log.info("worker stream %s broke: %s", self.hello.worker_id, from_rpc_error(err))
            if self.welcomes > welcomed_before:
                delay = self._backoff[0]
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), delay * random.uniform(0.5, 1.0))
            delay = min(delay * 2, self._backoff[1])

    async def _is_fatal(self, err: grpc.RpcError) -> bool:
        if self._stop.is_set():
            return True
        code = err.code() if callable(getattr(err, "code", None)) else None
        if self.welcomes == 0 and code in FATAL_BEFORE_WELCOME:
            async with self._state:
                self._failure = from_rpc_error(err)
                self._state.notify_all()
            return True
        return False

    async def _serve_once(self) -> None:
        call = self._stub.Connect(metadata=self._metadata)
        self._call = call
        replies = _Replies(call)
        submit = self._dispatcher.submit
        try:
            # a hello that cannot be written leaves the call failed: the read below raises its status
            await replies.send(pb.WorkerMessage(hello=self.hello))
            async for message in call:
                kind = message.WhichOneof("msg")
                if kind == "welcome":
                    await self._welcomed()
                    continue
                submit(message, kind, replies.send)
        finally:
            replies.close()
            self._call = None

    async def _welcomed(self) -> None:
        async with self._state:
            self.welcomes += 1
            self._state.notify_all()


def _cancelling() -> bool:
    """Whether the current task itself is being cancelled (not merely its gRPC call)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


class _Replies:
    """The writing side of one connection. Each call's task writes its reply itself, right when
    it is ready — no queue and writer task between, so a call takes fewer turns of the event loop —
    one write at a time, as gRPC allows. Once the stream is gone its replies are dropped harmlessly:
    the daemon redelivers the calls on the next stream, where the deduplicated task's reply goes."""

    def __init__(self, call: Any) -> None:
        self._call = call
        self._lock = asyncio.Lock()
        self._closed = False

    async def send(self, message: pb.WorkerMessage) -> None:
        """Write ``message`` on this connection, or nothing once it is gone; raises nothing but a
        cancellation of the calling task itself."""
        if self._closed:
            return
        async with self._lock:
            if self._closed:
                return
            try:
                await self._call.write(message)
            except (grpc.RpcError, asyncio.InvalidStateError):
                self._closed = True  # the stream ended: its reader sees why
            except asyncio.CancelledError:
                if _cancelling():
                    raise
                self._closed = True  # the call was cancelled (reconnect, stop), not this task

    def close(self) -> None:
        self._closed = True
