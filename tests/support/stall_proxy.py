"""A byte-for-byte proxy that can stall: the database "black-holed" without an error.

A partition rarely closes connections; packets just stop. ``StallProxy`` stands between a
daemon and its PostgreSQL server (unix socket or TCP on loopback) and, while stalled, forwards
nothing and drops nothing: bytes already sent stay in the socket buffers, new connections are
accepted and held. ``resume()`` lets everything through again, in order. With a ``delay``, every
chunk is passed on that many seconds after it arrived, each way (a database a network away: a
round trip costs twice the delay, however many round trips are in flight). The proxy runs its
own event loop in a thread so that synchronous tests, the chaos harness and the benchmarks can
drive it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
import threading
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
