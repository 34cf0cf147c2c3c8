"""The worker stream of a blocking ``Runtime``: a face over the asyncio core's ``WorkerStream``.

The core (``toolnexus_client.aio._worker``) serves the runtime's calls over
``Connect`` on the client's loop, reconnecting with backoff and deduplicating
redelivered calls; the plain tools, transport and resolver it calls run in the
loop's thread pool. This face gives ``rt.worker`` its blocking methods.
"""

from __future__ import annotations

from ._gen import runtime_pb2 as pb
from ._loop import LoopThread
from .aio._worker import FATAL_BEFORE_WELCOME
from .aio._worker import WorkerStream as CoreWorker

__all__ = ["FATAL_BEFORE_WELCOME", "WorkerStream"]


class WorkerStream:
    """Serves one runtime's calls over Connect on the client's loop."""

    def __init__(self, core: CoreWorker, loop: LoopThread) -> None:
        self._core = core
        self._loop = loop

    @property
    def hello(self) -> pb.WorkerHello:
        return self._core.hello

    @property
    def welcomes(self) -> int:
        """How many times the daemon welcomed this worker (1 + reconnections)."""
        return self._core.welcomes

    def wait_welcomed(self, count: int, timeout: float) -> None:
        """Block until the daemon has welcomed this worker ``count`` times in total."""
        self._loop.run(self._core.wait_welcomed(count, timeout))

    def reconnect(self) -> None:
        """Drop the current stream; the worker says hello again and the daemon re-sends what it lost."""
        self._loop.call_soon(self._core.reconnect)

    def stop(self) -> None:
        """Close the stream; calls still running are abandoned (redelivered elsewhere)."""
        self._loop.run(self._core.stop())
