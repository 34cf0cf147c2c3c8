"""A watch outlives the daemon ending its stream: the client reopens it after the last seq it got.

The daemon is killed with SIGKILL and started again on the same address while a watch is open;
the events committed after the restart arrive on the same iteration, with no gap and no
duplicate — in the blocking client and in the asyncio one.
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

from tests.e2e.test_crash_reattach import AGENT, REGISTRY, free_port, mock_transport
from tests.support.daemon import DaemonProcess
from toolnexus_client import Runtime, aio
from toolnexus_client.errors import Unavailable


def _until_idle(events: list[int], stop: threading.Event, stream: object, handle: str) -> None:
    for event in stream:  # type: ignore[attr-defined]
        events.append(event.seq)
        if event.type == "transition" and event.handle == handle and event.to_state == "idle":
            stop.set()
            return


def test_the_blocking_watch_reopens_after_a_restart(tmp_path: Path) -> None:
    proc = DaemonProcess(tmp_path / "data", listen=(f"127.0.0.1:{free_port()}",)).start()
    try:
        with Runtime.new(target=proc.target, registry=REGISTRY, transport=mock_transport) as rt:
            handle = rt.spawn(rt.root, AGENT)
            rt.wake(handle, "please perform the secret action")
            pending = rt.wait(handle, timeout=30).pending
            assert pending is not None and rt.worker is not None
            seqs: list[int] = []
            done = threading.Event()
            stream = rt.watch()
            reader = threading.Thread(target=_until_idle, args=(seqs, done, stream, handle), daemon=True)
            reader.start()
            proc.kill9()
            proc.start()
            rt.worker.wait_welcomed(2, timeout=30)
            rt.resume({"id": pending.id, "ok": True})
            reader.join(30)
            assert done.is_set(), seqs
            assert seqs == list(range(1, len(seqs) + 1)) and len(seqs) > 5
    finally:
        proc.stop()


def test_the_asyncio_watch_reopens_after_a_restart(tmp_path: Path) -> None:
    proc = DaemonProcess(tmp_path / "data", listen=(f"127.0.0.1:{free_port()}",)).start()

    async def scenario() -> list[int]:
        rt = await aio.Runtime.new(target=proc.target, registry=REGISTRY, llm={
            "style": "worker", "model": "scripted"}, transport=mock_transport)
        try:
            handle = await rt.spawn(rt.root, AGENT)
            await rt.wake(handle, "please perform the secret action")
            pending = (await rt.wait(handle, timeout=30)).pending
            assert pending is not None
            seqs: list[int] = []

            async def follow() -> None:
                async for event in rt.watch():
                    seqs.append(event.seq)
                    if event.type == "transition" and event.handle == handle and event.to_state == "idle":
                        return

            reader = asyncio.create_task(follow())
            await asyncio.sleep(0.5)
            await asyncio.to_thread(proc.kill9)
            await asyncio.to_thread(proc.start)
            await asyncio.wait_for(_resume_when_served(rt, pending.id), 30)
            await asyncio.wait_for(reader, 30)
            return seqs
        finally:
            await rt.detach()

    try:
        seqs = asyncio.run(scenario())
        assert seqs == list(range(1, len(seqs) + 1)) and len(seqs) > 5
    finally:
        proc.stop()


async def _resume_when_served(rt: aio.Runtime, request_id: str) -> None:
    """Resume as a client does after a restart: retried while the channel reconnects (UNAVAILABLE
    is always safe to retry; a Resume that landed answers duplicate)."""
    while True:
        try:
            await rt.resume({"id": request_id, "ok": True})
            return
        except Unavailable:
            await asyncio.sleep(0.2)


def test_cancel_ends_a_watch_waiting_to_reopen_at_once(tmp_path: Path) -> None:
    """While the daemon is gone the watch waits between reopenings (up to 2 s); ``cancel()`` from
    another thread ends the iteration then and there, not after that wait."""
    proc = DaemonProcess(tmp_path / "data", listen=(f"127.0.0.1:{free_port()}",)).start()
    try:
        with Runtime.new(target=proc.target, registry=REGISTRY, transport=mock_transport) as rt:
            rt.spawn(rt.root, AGENT)
            stream = rt.watch()
            ended = threading.Event()
            errors: list[BaseException] = []

            def consume() -> None:
                try:
                    for _ in stream:
                        pass
                except BaseException as exc:  # what the thread would die of
                    errors.append(exc)
                ended.set()

            threading.Thread(target=consume, daemon=True).start()
            proc.kill9()
            time.sleep(3.5)  # past 0.1 + 0.2 + 0.4 + 0.8 + 1.6 s of backoff: in the 2 s wait now
            assert not ended.is_set()
            t0 = time.monotonic()
            stream.cancel()
            assert ended.wait(5) and errors == []
            assert time.monotonic() - t0 < 0.3
    finally:
        proc.stop()
