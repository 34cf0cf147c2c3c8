"""A ListPending page costs the same with 10, 1,000 or 100,000 handles parked (``lps``).

    .venv/bin/python -m bench.pending_scale                       # LMDB, levels 10,10000,100000
    .venv/bin/python -m bench.pending_scale --store postgresql    # the same on PostgreSQL

What is timed is the servicer's whole work for one ``ListPending`` call
(``engine.verbs.inbox.list_pending``: the index read, the handle records of the page,
the ``PendingItem`` messages), in process, on a real store: LMDB in a temp dir,
or PostgreSQL started from the tests' embedded wheel with durable settings
(``bench/pg_server.py``). gRPC's own cost per call does not depend on the
number of handles parked, so it is left out to keep the ratio about the index.
A bench of the daemon alone, in its own process: it calls the servicer's function and reads the
daemon's own messages (``toolnexus_daemon.api._gen``), as no client can.

The handles are written straight into the store as the engine writes parked
handles (suspended leaves with a pending request), spread over 100 runtimes,
one in ten of kind ``input``, so levels grow in minutes rather than hours.
Each query runs ``--calls`` times per level and the median is reported:

  first      the first page of 100 across every runtime
  deep       a page of 100 from a token in the middle of the list
  kind       the first page of 100 of kind ``input`` (a tenth of the rows)
  runtime    the first page of 100 of one runtime

``index_only_ms`` is the index read alone (``Store.pending``, rows without records).
At 10 parked a page holds at most 10 items, so ``ratio_full`` compares full
pages (the largest level against the middle one, where every query fills its
page) and ``ratio_per_item_vs_smallest`` the cost per listed item against the
smallest level.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from toolnexus_daemon.engine.verbs import inbox as inbox_reads
from toolnexus_daemon.store import Batch, LmdbStore, Store
from toolnexus_daemon.store.base import PendingQuery

RUNTIMES = 100
BATCH = 2000


def parked(rid: str, n: int, base: float) -> tuple[tuple[str, str], dict[str, Any]]:
    hid = f"root/approver.{n}"
    kind = "input" if n % 10 == 0 else "approval"
    return (rid, hid), {"id": hid, "agent": "approver", "state": "suspended", "parent": "root", "depth": 1,
                        "wake_queue": [], "escalating": False, "suspended_at": base + n * 1e-3,
                        "pending": {"id": f"q-{rid}-{n}", "kind": kind, "prompt": "approve?",
                                    "data": {"path": hid.split("/")}}}


async def grow(store: Store, have: int, want: int) -> None:
    """Park handles ``have .. want - 1`` round robin over the runtimes, in batches."""
    base = 1_700_000_000.0
    for start in range(have, want, BATCH):
        last = min(want, start + BATCH)
        handles = dict(parked(f"rt-{i % RUNTIMES:03d}", i, base) for i in range(start, last))
        runtimes = {f"rt-{i:03d}": {"created_at": base} for i in range(RUNTIMES)} if start == 0 else {}
        await store.commit(Batch(runtimes=runtimes, handles=handles))


def median_ms(call: Callable[[], inbox_reads.PendingPage], calls: int) -> tuple[float, int]:
    times, items = [], 0
    for _ in range(calls):
        started = time.perf_counter()
        items = len(call().items)
        times.append((time.perf_counter() - started) * 1000)
    return round(statistics.median(times), 4), items


def _timed(call: Callable[[], object]) -> float:
    started = time.perf_counter()
    call()
    return (time.perf_counter() - started) * 1000


def measure(store: Store, parked_now: int, calls: int) -> dict[str, Any]:
    seen = inbox_reads.Visibility(inbox_reads.presented(""))
    mid = store.pending(PendingQuery(limit=max(1, parked_now // 2)))[-1]
    queries = {"first": PendingQuery(limit=100), "deep": PendingQuery(after=mid, limit=100),
               "kind": PendingQuery(kind="input", limit=100),
               "runtime": PendingQuery(runtime_id="rt-007", limit=100)}
    out: dict[str, Any] = {}
    for name, query in queries.items():
        ms, items = median_ms(lambda q=query: inbox_reads.list_pending(store, q, seen), calls)  # type: ignore[misc]
        index_ms = statistics.median(_timed(lambda q=query: store.pending(q)) for _ in range(calls))  # type: ignore[misc]
        out[name] = {"median_ms": ms, "items": items, "per_item_us": round(ms * 1000 / max(items, 1), 2),
                     "index_only_ms": round(index_ms, 4)}
    return out


@contextlib.contextmanager
def opened(kind: str, base: Path) -> Iterator[Store]:
    if kind == "lmdb":
        store = LmdbStore(base / "data", map_size=8 << 30, sync=False)
        try:
            yield store
        finally:
            store.close()
        return
    from bench.pg_server import durable_server
    from toolnexus_daemon.store.postgres.store import PgStore

    with durable_server() as server:
        store = PgStore(server.fresh_database("lps"))
        try:
            yield store
        finally:
            store.close()


def run(kind: str, levels: list[int], calls: int) -> dict[str, Any]:
    results: dict[str, Any] = {"store": kind, "calls": calls, "levels": {}}
    with tempfile.TemporaryDirectory(prefix="tnx-lps-") as tmp, opened(kind, Path(tmp)) as store:
        have = 0
        for level in levels:
            started = time.perf_counter()
            asyncio.run(grow(store, have, level))
            have = level
            print(f"lps {kind}: parked {level} in {time.perf_counter() - started:.1f}s", file=sys.stderr)
            results["levels"][str(level)] = measure(store, level, calls)
    lo, full, hi = (results["levels"][str(n)] for n in (levels[0], levels[-2], levels[-1]))
    results["ratio_full"] = {q: round(hi[q]["median_ms"] / full[q]["median_ms"], 2) for q in hi}
    results["ratio_index_only"] = {q: round(hi[q]["index_only_ms"] / full[q]["index_only_ms"], 2) for q in hi}
    results["ratio_per_item_vs_smallest"] = {
        q: round(hi[q]["per_item_us"] / lo[q]["per_item_us"], 2) for q in hi}
    return results


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.pending_scale")
    p.add_argument("--store", choices=("lmdb", "postgresql"), default="lmdb")
    p.add_argument("--levels", default="10,10000,100000")
    p.add_argument("--calls", type=int, default=300)
    p.add_argument("--out", type=Path, default=None, help="also write the results JSON here")
    ns = p.parse_args(argv)
    levels = sorted(int(x) for x in ns.levels.split(",") if x)
    if len(levels) < 3:
        p.error("--levels needs three ascending counts (the smallest, a full page's, the largest)")
    results = run(ns.store, levels, ns.calls)
    text = json.dumps(results, indent=2)
    print(text)
    if ns.out is not None:
        ns.out.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
