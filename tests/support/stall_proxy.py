"""A byte-for-byte proxy that can stall: the database "black-holed" without an error.

A partition rarely closes connections; packets just stop. ``StallProxy`` stands between a
daemon and its PostgreSQL server (unix socket or TCP on loopback) and, while stalled, forwards
nothing and drops nothing: bytes already sent stay in the socket buffers, new connections are
accepted and held. ``resume()`` lets everything through again, in order. With a ``delay``, every
chunk is passed on that many seconds after it arrived, each way (a database a network away: a
round trip costs twice the delay, however many round trips are in flight). The proxy runs its
own event loop in a thread so that synchronous tests and the chaos harness can drive it.

``StallProxyProcess`` runs the delay line in a process of its own (``python -m
tests.support.stall_proxy``, ``DelayLineProxy``: threads sleeping until each chunk is due), so
that a benchmark's delay is the delay: a proxy thread sharing the benchmark's GIL with its
clients passes chunks on late whenever the clients are busy, and an asyncio timer wakes up to
a millisecond late.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

PG_SOCKET = ".s.PGSQL.5432"  # what libpq opens in ``host=<dir>`` with the default port
CHUNK = 64 * 1024


class StallProxy:
    """Forward a unix socket (``listen_dir/.s.PGSQL.5432``) to ``upstream`` (a socket path)."""

    def __init__(self, upstream: str, delay: float = 0.0) -> None:
        self.upstream, self.delay = upstream, delay
        # a short directory: unix socket paths are limited to about 100 bytes
        self.listen_dir = Path(tempfile.mkdtemp(prefix="tnsp-", dir="/tmp"))
        self._loop = asyncio.new_event_loop()
        self._flowing = asyncio.Event()
        self._server: asyncio.AbstractServer | None = None
        self._conns: set[asyncio.Task[None]] = set()
        self._thread = threading.Thread(target=self._loop.run_forever, name="stall-proxy", daemon=True)
        # how late each delayed chunk was passed on, seconds past its due time (the last 100,000)
        self.lateness: collections.deque[float] = collections.deque(maxlen=100_000)

    @classmethod
    def for_dsn(cls, dsn: str, delay: float = 0.0) -> tuple[StallProxy, str]:
        """A proxy in front of a ``…?host=<socket dir>`` DSN, and the DSN that goes through it."""
        base, _, host = dsn.partition("?host=")
        if not host:
            raise ValueError(f"want a unix-socket DSN (…?host=DIR), got {dsn!r}")
        proxy = cls(os.path.join(host, PG_SOCKET), delay).start()
        return proxy, f"{base}?host={proxy.listen_dir}"

    def start(self) -> StallProxy:
        self._thread.start()
        self._call(self._start())
        return self

    async def _start(self) -> None:
        self._flowing.set()
        self._server = await asyncio.start_unix_server(self._serve, str(self.listen_dir / PG_SOCKET))

    def stall(self) -> None:
        """From now on nothing passes either way, on open connections or new ones."""
        self._loop.call_soon_threadsafe(self._flowing.clear)

    def resume(self) -> None:
        self._loop.call_soon_threadsafe(self._flowing.set)

    def late(self) -> dict[str, float]:
        """How late the delayed chunks passed on since the last call were, ms past their due
        time (``count``, ``p50_ms``, ``p90_ms``, ``p99_ms``)."""
        async def take() -> list[float]:  # on the proxy's loop, which appends to it
            taken = sorted(self.lateness)
            self.lateness.clear()
            return taken

        return _late_summary(asyncio.run_coroutine_threadsafe(take(), self._loop).result(10))

    @property
    def stalled(self) -> bool:
        return not self._flowing.is_set()

    def close(self) -> None:
        if not self._thread.is_alive():
            return
        self._call(self._close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        with contextlib.suppress(OSError):
            (self.listen_dir / PG_SOCKET).unlink()
            self.listen_dir.rmdir()

    async def _close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._conns):
            task.cancel()
        await asyncio.gather(*self._conns, return_exceptions=True)

    def _call(self, coro: object) -> None:
        asyncio.run_coroutine_threadsafe(coro, self._loop).result(10)  # type: ignore[arg-type]

    async def _serve(self, down_r: asyncio.StreamReader, down_w: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._conns.add(task)
        try:
            await self._flowing.wait()  # a connection made while stalled is held, not refused
            up_r, up_w = await asyncio.open_unix_connection(self.upstream)
            await asyncio.gather(self._pump(down_r, up_w), self._pump(up_r, down_w))
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            self._conns.discard(task)
            down_w.close()

    async def _pump(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        if self.delay > 0:
            return await self._delayed_pump(src, dst)
        try:
            while True:
                await self._flowing.wait()
                data = await src.read(CHUNK)
                if not data:
                    break
                await self._flowing.wait()  # read before the stall began: held until it ends
                dst.write(data)
                await dst.drain()
        finally:
            dst.close()

    async def _delayed_pump(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        """Read on at once; each chunk is written ``delay`` after it arrived (a delay line, so
        chunks in flight overlap instead of queueing behind each other's delay)."""
        line: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()
        loop = asyncio.get_running_loop()

        async def send() -> None:
            while True:
                due, data = await line.get()
                if not data:
                    return
                await asyncio.sleep(max(due - loop.time(), 0))
                await self._flowing.wait()
                self.lateness.append(loop.time() - due)
                dst.write(data)
                await dst.drain()

        sender = asyncio.create_task(send())
        try:
            while True:
                await self._flowing.wait()
                data = await src.read(CHUNK)
                line.put_nowait((loop.time() + self.delay, data))
                if not data:
                    break
            await sender
        finally:
            sender.cancel()
            dst.close()


class DelayLineProxy:
    """``StallProxy``'s delay line on threads (no stall): each direction of a connection is a reader
    thread that reads on at once and a sender thread that sleeps until each chunk is due. An
    asyncio timer wakes up to 1 ms late (epoll's timeout is whole milliseconds, rounded up: a
    3 ms delay became 3.5 ms); ``time.sleep`` wakes within tens of microseconds. What
    ``StallProxyProcess`` runs."""

    def __init__(self, upstream: str, delay: float) -> None:
        self.upstream, self.delay = upstream, delay
        self.listen_dir = Path(tempfile.mkdtemp(prefix="tnsp-", dir="/tmp"))
        self.lateness: collections.deque[float] = collections.deque(maxlen=100_000)
        self._lock = threading.Lock()
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._closed = False

    def start(self) -> DelayLineProxy:
        self._server.bind(str(self.listen_dir / PG_SOCKET))
        self._server.listen(128)
        threading.Thread(target=self._accept, name="delay-accept", daemon=True).start()
        return self

    def late(self) -> dict[str, float]:
        """As ``StallProxy.late``."""
        with self._lock:
            late = sorted(self.lateness)
            self.lateness.clear()
        return _late_summary(late)

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self._server.close()
            (self.listen_dir / PG_SOCKET).unlink()
            self.listen_dir.rmdir()

    def _accept(self) -> None:
        while not self._closed:
            try:
                down, _ = self._server.accept()
                up = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                up.connect(self.upstream)
            except OSError:
                if self._closed:
                    return
                continue
            for src, dst in ((down, up), (up, down)):
                line: queue.SimpleQueue[tuple[float, bytes]] = queue.SimpleQueue()
                threading.Thread(target=self._read, args=(src, line), daemon=True).start()
                threading.Thread(target=self._send, args=(dst, line), daemon=True).start()

    def _read(self, src: socket.socket, line: queue.SimpleQueue[tuple[float, bytes]]) -> None:
        data = b""
        with contextlib.suppress(OSError):
            while data := src.recv(CHUNK):
                line.put((time.monotonic() + self.delay, data))
        line.put((time.monotonic() + self.delay, b""))

    def _send(self, dst: socket.socket, line: queue.SimpleQueue[tuple[float, bytes]]) -> None:
        try:
            while True:
                due, data = line.get()
                wait = due - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                if not data:
                    return
                late = time.monotonic() - due
                with self._lock:
                    self.lateness.append(late)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                dst.shutdown(socket.SHUT_WR)


def _late_summary(late: list[float]) -> dict[str, float]:
    def pct(q: float) -> float:
        return late[min(len(late) - 1, int(q * len(late)))] * 1000 if late else 0.0

    return {"count": float(len(late)), "p50_ms": pct(0.5), "p90_ms": pct(0.9), "p99_ms": pct(0.99)}


class StallProxyProcess:
    """A delaying proxy in its own process (``DelayLineProxy``): ``start`` returns once it listens, ``close``
    stops it (it also ends when this process closes its stdin: a killed benchmark leaves none),
    ``late`` tells how late it passed chunks on since it was last asked."""

    def __init__(self, upstream: str, delay: float) -> None:
        self.upstream, self.delay = upstream, delay
        self.proc: subprocess.Popen[str] | None = None
        self.listen_dir = Path()

    @classmethod
    def for_dsn(cls, dsn: str, delay: float) -> tuple[StallProxyProcess, str]:
        """As ``StallProxy.for_dsn``, the proxy in a process of its own."""
        base, _, host = dsn.partition("?host=")
        if not host:
            raise ValueError(f"want a unix-socket DSN (…?host=DIR), got {dsn!r}")
        proxy = cls(os.path.join(host, PG_SOCKET), delay).start()
        return proxy, f"{base}?host={proxy.listen_dir}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self, timeout: float = 30) -> StallProxyProcess:
        root = Path(__file__).resolve().parents[2]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.support.stall_proxy", "--upstream", self.upstream,
             "--delay", repr(self.delay)], cwd=root, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            env={**os.environ, "PYTHONPATH": str(root)})
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()  # the proxy's first line: the directory it listens in
        if not line:
            self.close()
            raise RuntimeError("the proxy process exited before it listened")
        self.listen_dir = Path(line)
        return self

    def late(self) -> dict[str, float]:
        """``DelayLineProxy.late`` of the proxy in the process."""
        assert self.proc is not None and self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("lateness\n")
        self.proc.stdin.flush()
        return {str(k): float(v) for k, v in json.loads(self.proc.stdout.readline()).items()}

    def close(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                stream.close()


def main() -> None:
    """Run one proxy until SIGTERM or the end of stdin; print the directory it listens in, and
    for each ``lateness`` line read, how late chunks were passed on since the last (one JSON line)."""
    parser = argparse.ArgumentParser(description="a delaying unix-socket proxy (StallProxy) as a process")
    parser.add_argument("--upstream", required=True, help="the server's socket path")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds, each way")
    args = parser.parse_args()
    proxy = DelayLineProxy(args.upstream, args.delay).start()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    threading.Thread(target=_commands, args=(proxy, stop), daemon=True).start()
    print(proxy.listen_dir, flush=True)
    try:
        while not stop.wait(1):  # the main thread sleeps while the proxy's threads pass chunks on
            pass
    finally:
        proxy.close()


def _commands(proxy: DelayLineProxy, stop: threading.Event) -> None:
    for line in sys.stdin:
        if line.strip() == "lateness":
            print(json.dumps(proxy.late()), flush=True)
    stop.set()


if __name__ == "__main__":
    main()
