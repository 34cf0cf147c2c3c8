"""A TCP proxy between a daemon and the test PostgreSQL server that can stall: a database that hangs.

The daemon connects to ``127.0.0.1:port``; each connection is relayed to the server's unix
socket. ``stall()`` stops the relay in both directions without closing or dropping anything:
bytes already sent wait in the proxy and the kernel's buffers, connections stay open and new
ones are accepted, so the daemon sees no error at all, only silence — the database cut off by
a partition that drops packets, or a server that stopped answering. ``resume()`` lets every
held byte through, in order. The proxy runs its own event loop on a thread of its own.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

CHUNK = 64 << 10


class StallingProxy:
    """``start()`` returns the port; ``stall()``/``resume()`` from any thread; ``close()`` at the end."""

    def __init__(self, socket_dir: Path, server_port: int = 5432) -> None:
        self._socket = str(socket_dir / f".s.PGSQL.{server_port}")
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="pg-proxy", daemon=True)
        self._flowing = asyncio.Event()
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []
        self.port = 0

    def start(self) -> int:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._listen(), self._loop).result(10)
        return self.port

    def dsn(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    async def _listen(self) -> None:
        self._flowing.set()
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _relay(self, down_r: asyncio.StreamReader, down_w: asyncio.StreamWriter) -> None:
        up_r, up_w = await asyncio.open_unix_connection(self._socket)
        self._writers += [down_w, up_w]
        await asyncio.gather(self._pump(down_r, up_w), self._pump(up_r, down_w), return_exceptions=True)
        for w in (down_w, up_w):
            w.close()

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            data = await reader.read(CHUNK)
            await self._flowing.wait()  # stalled: the chunk waits here, nothing is dropped
            if not data:
                writer.write_eof()
                return
            writer.write(data)
            await writer.drain()

    def stall(self) -> None:
        self._loop.call_soon_threadsafe(self._flowing.clear)

    def resume(self) -> None:
        self._loop.call_soon_threadsafe(self._flowing.set)

    def close(self) -> None:
        async def shut() -> None:
            self._flowing.set()
            if self._server is not None:
                self._server.close()
            for w in self._writers:
                w.close()

        if self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(shut(), self._loop).result(10)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
