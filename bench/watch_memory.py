"""What Watch streams whose clients do not read cost the daemon in memory.

    .venv/bin/python -m bench.watch_memory                                  # this tree, 500 streams
    .venv/bin/python -m bench.watch_memory --checkout ../main            # another tree's daemon
    .venv/bin/python -m bench.watch_memory --streams 40 --results 8         # smaller

One daemon (a subprocess of ``--checkout``'s code on a synced LMDB directory in
a temp dir, 127.0.0.1 only) and one runtime with ``--results`` settled turns,
each a ``result`` event carrying a model answer of ``--result-bytes`` (the
scripted model server of the tests answers on 127.0.0.1). Then ``--streams``
Watch streams from 0 are opened from this process through the shipped asyncio
client (``toolnexus_client.aio.Daemon.watch``, one ``Daemon`` per connection), spread over
``--channels`` connections, and never read past their first message (read so
that every stream's daemon side has surely started): each writes until gRPC's
flow control stops it, and holds whatever it holds for a stream that does not
read. The daemon's anonymous resident memory (``RssAnon``: LMDB's
mapped pages are file-backed and left out) is sampled until it stops growing;
its growth over the runtime's baseline, per stream, is the figure. Then every
stream is cancelled and the RSS read again, to see what is given back.

Bounded: opening stops once the daemon grew by ``--cap-mb`` (the old daemon
held tens of MB per stream; the machine is shared), and the figure is then per
stream opened. Streams refused by the daemon's per-caller limit are counted,
not retried; give the daemon ``--daemon-arg=--max-watch-streams-per-caller=1000``
to measure 500 streams from one caller.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.support.daemon import DaemonProcess  # noqa: E402  (bench.common put ROOT on sys.path)
from toolnexus_client import Runtime, ToolnexusError, agent, aio, registry
from toolnexus_devtools import ScriptedModelServer, chat_response

from .common import ROOT, log, mib, rss_split


def _anon(pid: int) -> int:
    return rss_split(pid)[0]


def _settled(pid: int, quiet_s: float = 5.0, most_s: float = 120.0) -> int:
    """The daemon's anonymous RSS once it has not grown for ``quiet_s`` (at most ``most_s``)."""
    deadline, peak, since = time.monotonic() + most_s, _anon(pid), time.monotonic()
    while time.monotonic() < deadline and time.monotonic() - since < quiet_s:
        time.sleep(0.25)
        now = _anon(pid)
        if now > peak + (1 << 20):
            peak, since = now, time.monotonic()
    return _anon(pid)


def _fill(target: str, model: ScriptedModelServer, results: int, size: int) -> str:
    """A runtime with ``results`` settled turns, each answering ``size`` bytes of text."""
    answer = "x" * size
    model.script = lambda body: chat_response(content=answer)
    llm = {"style": "openai", "base_url": model.url, "model": "scripted", "timeout_ms": 5000}
    with Runtime.new(target, registry=registry(agent("writer", does="writes")), llm=llm) as rt:
        for _ in range(results):
            woken = rt.spawn(rt.root, "writer", prompt="go", wait=30.0)
            assert woken.result is not None and woken.result.status == "done", woken
        return rt.id


async def _open_streams(target: str, rid: str, args: argparse.Namespace, pid: int,
                        base: int) -> tuple[list[Any], list[aio.Daemon], dict[str, int], int]:
    """Open the streams (never read past their first message); returns them, their connections, how
    many ended before a first message (by status) and how many were opened before the cap."""
    channels = [aio.Daemon(target) for _ in range(args.channels)]
    calls: list[Any] = []
    for n in range(args.streams):
        # not reopened: a stream the daemon ends is counted below, by status
        calls.append(channels[n % len(channels)].watch(rid, reopen=False))
        if n % 20 == 19:
            await asyncio.sleep(0.2)  # let the daemon start writing before opening more
            if _anon(pid) - base > args.cap_mb << 20:
                log(f"stopped opening at {n + 1} streams: the daemon grew past --cap-mb {args.cap_mb}")
                break
    # one message from each (all at once, bounded): its daemon side has started, read its first page
    firsts = await asyncio.wait_for(asyncio.gather(*(anext(c) for c in calls), return_exceptions=True), 900)
    ended: dict[str, int] = {}  # streams that ended before their first message, by status
    for first in firsts:
        if isinstance(first, ToolnexusError):
            ended[first.code] = ended.get(first.code, 0) + 1
        elif isinstance(first, BaseException):
            raise first
    return calls, channels, ended, len(calls)


def run(args: argparse.Namespace) -> dict[str, Any]:
    checkout = Path(args.checkout).resolve()
    env = {"PYTHONPATH": f"{checkout}{os.pathsep}{checkout / 'clients' / 'python'}"}
    with tempfile.TemporaryDirectory(prefix="tnx-watch-mem-") as tmp, ScriptedModelServer() as model:
        proc = DaemonProcess(Path(tmp) / "data", *args.daemon_arg, env=env, cwd=checkout)
        proc.start(timeout=60)
        try:
            assert proc.proc is not None
            pid = proc.proc.pid
            rid = _fill(proc.target, model, args.results, args.result_bytes)
            base = _settled(pid)
            log(f"runtime {rid}: {args.results} results of {args.result_bytes} bytes; "
                f"daemon {mib(base)} MiB anon")

            async def scenario() -> dict[str, Any]:
                calls, channels, ended, opened = await _open_streams(proc.target, rid, args, pid, base)
                held = await asyncio.to_thread(_settled, pid)
                for call in calls:
                    call.cancel()
                for channel in channels:
                    await channel.close()
                after = await asyncio.to_thread(_settled, pid)
                open_streams = opened - sum(ended.values())
                return {"opened": opened, "ended_before_first_message": ended, "held_anon_mib": mib(held),
                        "growth_mib": mib(held - base),
                        "per_stream_mib": mib((held - base) / max(open_streams, 1)),
                        "after_cancel_anon_mib": mib(after), "kept_after_cancel_mib": mib(after - base)}

            out = asyncio.run(scenario())
        finally:
            proc.stop(timeout=60)
    return {"checkout": str(checkout), "streams": args.streams, "channels": args.channels,
            "results": args.results, "result_bytes": args.result_bytes, "daemon_args": args.daemon_arg,
            "baseline_anon_mib": mib(base), **out}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checkout", default=str(ROOT), help="the tree whose daemon runs (default: this one)")
    p.add_argument("--streams", type=int, default=500)
    p.add_argument("--channels", type=int, default=10, help="connections the streams are spread over")
    p.add_argument("--results", type=int, default=30)
    p.add_argument("--result-bytes", type=int, default=900_000)
    p.add_argument("--cap-mb", type=int, default=6000,
                   help="stop opening streams once the daemon grew this much")
    p.add_argument("--daemon-arg", action="append", default=[], help="an extra daemon flag (repeatable)")
    args = p.parse_args(argv)
    print(json.dumps(run(args), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
