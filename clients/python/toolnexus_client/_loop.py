"""LoopThread: the private event loop a blocking client object runs its asyncio core on.

The blocking ``Runtime`` and ``Daemon`` are faces over the asyncio client
(``toolnexus_client.aio``): each owns one event loop on a daemon thread, the
core's channel, worker stream and watches live on it, and every blocking
method submits one coroutine to it and waits for its result in the caller's
thread. So the client's behaviour (requests, replies, errors, the worker's
reconnect, a watch's resume) is written once, in the core.

Why a loop per object rather than a shared sans-IO core under two I/O layers:
requests, replies and errors were already shared (``_common``, ``_convert``,
``_pending``, ``errors``); what was written twice was the control flow around
them — the worker stream's reconnect and deduplication, the reopening
watches — which a sans-IO core cannot share without a state machine that both
faces drive. Measured with ``bench/client_cycle.py``, the hop from the
caller's thread to the loop costs about 0.15 ms of CPU per call (one blocking
``snapshot`` 0.82 → 0.96 ms; docs/decisions.md has the cycles).

Plain (blocking) tools, model transports and resolvers run in the loop's
default executor (``max_workers`` threads), as the asyncio client runs any
plain function, so a tool may call back into its runtime's blocking methods:
the call goes to the loop, which is free. Calling a blocking method from the
loop's own thread (an ``async def`` tool of a blocking client) would wait
forever, and raises ``RuntimeError`` instead. The caller's ``contextvars``
(OpenTelemetry's current span) go with each call to the loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from .errors import Cancelled

T = TypeVar("T")

_names = itertools.count(1)


class ClientClosed(ValueError):
    """A blocking call on a client that was detached or closed."""


class LoopThread:
    """One event loop on a daemon thread; ``run`` a coroutine on it from any other thread."""

    def __init__(self, max_workers: int = 8, name: str = "toolnexus-client") -> None:
        if max_workers < 1:
            raise ValueError("max_workers is at least 1 (the threads that run plain tools)")
        self._loop = asyncio.new_event_loop()
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers,
                                                               thread_name_prefix="toolnexus-call")
        self._loop.set_default_executor(self._executor)
        self._closed = False
        # the calls submitted and not answered yet: one the loop never ran is cancelled at close
        self._inflight: set[concurrent.futures.Future[Any]] = set()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop.run_forever, name=f"{name}-{next(_names)}",
                                        daemon=True)
        self._thread.start()

    @property
    def closed(self) -> bool:
        return self._closed

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on the loop and wait for its result (its exception is raised here)."""
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("a blocking toolnexus_client call from its own event loop (an async def tool "
                               "of a blocking client?) would wait forever: use toolnexus_client.aio there")
        with self._lock:
            if self._closed:
                coro.close()
                raise ClientClosed("this client is closed (detach/close/shutdown was called)")
            future = asyncio.run_coroutine_threadsafe(coro, self._loop)
            self._inflight.add(future)
        try:
            return future.result(timeout)
        except concurrent.futures.CancelledError:
            raise Cancelled("CANCELLED", "the client was closed while this call was in flight") from None
        except BaseException:
            future.cancel()  # a KeyboardInterrupt or a timeout here: do not leave the call running
            raise
        finally:
            self._inflight.discard(future)

    def call(self, fn: Callable[[], T]) -> T:
        """Run a plain function on the loop's thread (creating a grpc.aio call must happen there)."""
        async def call_on_loop() -> T:
            return fn()

        return self.run(call_on_loop())

    def call_soon(self, fn: Callable[[], object]) -> None:
        """Schedule ``fn`` on the loop from any thread without waiting; nothing once closed."""
        if threading.current_thread() is self._thread:
            fn()
            return
        try:
            self._loop.call_soon_threadsafe(fn)
        except RuntimeError:  # the loop closed meanwhile: what fn would stop is already stopped
            pass

    def close(self, timeout: float = 5.0) -> None:
        """Cancel what still runs on the loop, stop it and end its thread. Idempotent."""
        if self._closed:
            return
        if threading.current_thread() is not self._thread:
            self.run(_cancel_others())
        with self._lock:
            self._closed = True  # from here run() refuses: nothing new reaches the loop
            stranded = list(self._inflight)
        self._loop.call_soon_threadsafe(self._loop.stop)
        # plain calls still running in the pool are abandoned, as the daemon redelivers them
        self._executor.shutdown(wait=False, cancel_futures=True)
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)
            if not self._thread.is_alive():
                # a call another thread submitted after the cancelling above looked (a watch's next
                # event, asked for while a detach ran) was never run: its caller gets Cancelled
                # rather than waiting forever on a stopped loop (cancelled before the loop closes)
                for future in stranded:
                    future.cancel()
                self._loop.close()


async def _cancel_others() -> None:
    """Cancel every task of the running loop but this one, and let them finish."""
    me = asyncio.current_task()
    others = [task for task in asyncio.all_tasks() if task is not me]
    for task in others:
        task.cancel()
    if others:
        await asyncio.wait(others, timeout=5.0)
