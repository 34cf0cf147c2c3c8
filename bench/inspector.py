"""The web inspector's pages are paged, never loaded whole: the first byte of the runtime page
of a runtime with 10,000 events, and of the pending page with 100,000 parked requests, within
200 ms (docs/inspector.md).

    .venv/bin/python -m bench.inspector                     # 100,000 parked, 10,000 events
    .venv/bin/python -m bench.inspector --out bench/results/inspector.json

The data is written straight into an LMDB store as the engine writes it (``bench.pending_scale``'s
parked handles over 100 runtimes, plus one runtime with a handle and ``--events`` stored events),
then the real daemon serves it with ``--ui-listen`` on loopback (no token: the inspector is open
there). Each page is fetched ``--calls`` times over HTTP/1.1 with a fresh connection; what is timed
is from sending the request to the first byte of the body (``ttfb``) and to the last (``total``);
the first fetch of each page (cold) is reported apart, and a page is within budget when the cold
fetch and the 95th percentile of the rest are under 200 ms.

A bench of the daemon alone: the store is written in process and the pages are fetched over HTTP.
The one gRPC call, ``Info``, reads where the daemon put its ``--ui-listen`` port (``config``, which
the Python client's ``Info`` does not carry), so it goes through the daemon's own stubs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from bench.common import daemon, machine, workdir
from bench.pending_scale import grow
from toolnexus_daemon.model import Event, EventType
from toolnexus_daemon.store import Batch, LmdbStore, Store

BUDGET_MS = 200.0
EVENTS_RUNTIME = "rt-events"


async def fill_events(store: Store, n: int) -> None:
    base = 1_700_000_000.0
    hid = "root/worker.1"
    handle = {"id": hid, "agent": "worker", "state": "idle", "parent": "root", "depth": 1, "wake_queue": [],
              "escalating": False, "turns_total": n // 4}
    for start in range(0, n, 2000):
        events = [Event(seq=i, runtime_id=EVENTS_RUNTIME, handle=hid, type=EventType.TOOL_CALL,
                        note=f"{hid}: tool lookup called ({i})", at="2026-12-05T08:00:00.000Z",
                        data={"call_id": f"c{i}", "arguments": {"q": "x" * 40}})
                  for i in range(start + 1, min(n, start + 2000) + 1)]
        batch = Batch(events=events)
        if start == 0:
            batch.runtimes[EVENTS_RUNTIME] = {"created_at": base}
            batch.handles[(EVENTS_RUNTIME, hid)] = handle
        await store.commit(batch)


def fetch(address: str, path: str) -> tuple[float, float, int]:
    """(ms to the first body byte, ms to the end, status) of one GET on a fresh connection."""
    host, _, port = address.rpartition(":")
    request = (f"GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n").encode()
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        started = time.perf_counter()
        sock.sendall(request)
        buf = b""
        first = 0.0
        while b"\r\n\r\n" not in buf:
            chunk = sock.recv(65536)
            if not chunk:
                break
            buf += chunk
        head, _, body = buf.partition(b"\r\n\r\n")
        while not body:
            chunk = sock.recv(65536)
            if not chunk:
                break
            body += chunk
        first = (time.perf_counter() - started) * 1000
        while sock.recv(65536):
            pass
        total = (time.perf_counter() - started) * 1000
    status = int(head.split(b" ", 2)[1]) if head else 0
    return first, total, status


def measure(address: str, path: str, calls: int) -> dict[str, Any]:
    """The first (cold: the store's pages not yet in memory) fetch apart, then ``calls`` more."""
    cold = fetch(address, path)
    results = [fetch(address, path) for _ in range(calls)]
    assert all(status == 200 for _, _, status in [cold, *results]), results[:3]
    ttfb = sorted(r[0] for r in results)
    total = sorted(r[1] for r in results)
    p95 = ttfb[min(len(ttfb) - 1, int(len(ttfb) * 0.95))]
    return {"path": path, "calls": calls, "cold_ttfb_ms": round(cold[0], 2),
            "ttfb_median_ms": round(statistics.median(ttfb), 2), "ttfb_p95_ms": round(p95, 2),
            "ttfb_max_ms": round(ttfb[-1], 2), "total_median_ms": round(statistics.median(total), 2),
            "within_budget": p95 < BUDGET_MS and cold[0] < BUDGET_MS}


def ui_address(proc: Any) -> str:
    """The inspector's address, as the daemon's ``Info`` reports it (through the public client)."""
    from toolnexus_client import Daemon

    client = Daemon(proc.target)
    try:
        return str(client.info(timeout=10).config["ui-listen"])
    finally:
        client.close()


def run(parked: int, events: int, calls: int) -> dict[str, Any]:
    with workdir("tnx-inspector-") as base:
        store = LmdbStore(base / "data", map_size=8 << 30, sync=False)
        started = time.perf_counter()
        try:
            asyncio.run(grow(store, 0, parked))
            asyncio.run(fill_events(store, events))
        finally:
            store.close()
        print(f"inspector: wrote {parked} parked and {events} events in {time.perf_counter() - started:.1f}s",
              file=sys.stderr)
        with daemon(base, "--ui-listen", "127.0.0.1:0", unix=False, timeout=600) as proc:
            address = ui_address(proc)
            pages = {"pending": measure(address, "/pending", calls),
                     "pending_deep": measure(address, "/pending?runtime=rt-007", calls),
                     "runtime_events": measure(address, f"/runtime?id={EVENTS_RUNTIME}", calls),
                     "runtime_events_oldest": measure(address, f"/runtime?id={EVENTS_RUNTIME}&after=0",
                                                      calls),
                     "runtimes": measure(address, "/", calls)}
    return {"parked": parked, "events": events, "budget_ms": BUDGET_MS, "pages": pages, "machine": machine()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.inspector")
    p.add_argument("--parked", type=int, default=100_000)
    p.add_argument("--events", type=int, default=10_000)
    p.add_argument("--calls", type=int, default=30)
    p.add_argument("--out", type=Path, default=None, help="also write the results JSON here")
    ns = p.parse_args(argv)
    results = run(ns.parked, ns.events, ns.calls)
    text = json.dumps(results, indent=2)
    print(text)
    if ns.out is not None:
        ns.out.write_text(text + "\n", encoding="utf-8")
    ok = all(page["within_budget"] for page in results["pages"].values())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
