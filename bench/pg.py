"""Issue 16's figures: the daemon's cycle and transitions/s on PostgreSQL beside LMDB, and LangGraph
with its PostgreSQL checkpointer as the peer, in one run on one embedded server.

One durable PostgreSQL 18 server (``pg_server.DurablePg``: the tests' embedded
server with fsync on, unix socket only) serves a database for the daemon and
another for LangGraph. Two daemons run at once, one on synced LMDB and one with
``--store postgresql://…`` (synchronous_commit on), and their repetitions
alternate (LMDB, PG, then PG, LMDB, …): on a shared, noisy 2-core machine a burst
of someone else's load then falls on both sides, not on one, and the ratios
stay meaningful. Write transactions per cycle are counted on both stores (LMDB's
``last_txnid``, the server's next transaction id).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from . import peers
from .common import daemon, log, summary, tcp_target
from .pg_server import durable_server, next_xid
from .scenarios import Profile, _txn_id
from .tnx_aio import Daemon, run_concurrent

STORES = ("lmdb", "pg")
CLIENTS = (1, 8, 64)


def _order(rep: int) -> tuple[str, ...]:
    return STORES if rep % 2 == 0 else STORES[::-1]


async def _cycles(ds: dict[str, Daemon], prof: Profile) -> dict[str, Any]:
    """Sequential cycles, repetitions alternating between the stores: latency and phases (ms)."""
    for d in ds.values():
        for _ in range(prof.warmup):
            await d.cycle()
    reps: dict[str, list[float]] = {k: [] for k in ds}
    phases: dict[str, dict[str, list[float]]] = {k: {} for k in ds}
    for rep in range(prof.reps):
        for store in _order(rep):
            lat: list[float] = []
            rep_phases: dict[str, list[float]] = {}
            for _ in range(prof.cycles):
                t0 = time.perf_counter()
                await ds[store].cycle(rep_phases)
                lat.append(time.perf_counter() - t0)
            reps[store].append(_median(lat))
            for k, v in rep_phases.items():
                phases[store].setdefault(k, []).append(_median(v))
    return {store: {"latency_ms": summary(reps[store], 1e3),
                    "phases_ms": {k: summary(v, 1e3)["median"] for k, v in phases[store].items()}}
            for store in ds}


async def _rates(ds: dict[str, Daemon], clients: int, prof: Profile, per_cycle: int) -> dict[str, Any]:
    """Transitions/s with ``clients`` concurrent clients per store, repetitions alternating."""
    per_rep: dict[str, int] = {}
    for store, d in ds.items():
        await run_concurrent(clients, max(prof.warmup, clients), lambda i, d=d: d.cycle())
        n = max(clients, 8)
        elapsed = await run_concurrent(clients, n, lambda i, d=d: d.cycle())
        per_rep[store] = max(clients, int(n / elapsed * prof.transition_secs))
    rates: dict[str, list[float]] = {k: [] for k in ds}
    for rep in range(prof.reps):
        for store in _order(rep):
            d = ds[store]
            elapsed = await run_concurrent(clients, per_rep[store], lambda i, d=d: d.cycle())
            rates[store].append(per_rep[store] / elapsed * per_cycle)
    return {store: summary(v, 1.0, 1) for store, v in rates.items()}


async def _write_txns(d: Daemon, count: Any, n: int = 10) -> float:
    await d.cycle()
    before = count()
    for _ in range(n):
        await d.cycle()
    return round((count() - before) / n, 2)


def _median(values: list[float]) -> float:
    import statistics

    return statistics.median(values)


def _daemons(base: Path, prof: Profile, dsn: str, per_cycle: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with daemon(base, name="pg-lmdb", unix=False) as lm, \
            daemon(base, "--store", dsn, name="pg-pg", unix=False) as pgd:
        async def run() -> None:
            ds = {"lmdb": await Daemon.connect(tcp_target(lm)), "pg": await Daemon.connect(tcp_target(pgd))}
            try:
                out["cycle"] = await _cycles(ds, prof)
                log(f"pg cycle: lmdb {out['cycle']['lmdb']['latency_ms']}, pg {out['cycle']['pg']['latency_ms']}")
                out["write_txns_per_cycle"] = {
                    "lmdb": await _write_txns(ds["lmdb"], lambda: _txn_id(lm.data_dir)),
                    "pg": await _write_txns(ds["pg"], lambda: next_xid(dsn))}
                for clients in CLIENTS:
                    out[f"transitions_{clients}"] = await _rates(ds, clients, prof, per_cycle)
                    log(f"pg transitions x{clients}: {out[f'transitions_{clients}']}")
            finally:
                for d in ds.values():
                    await d.close()

        asyncio.run(run())
    return out


def _langgraph(dsn: str, prof: Profile) -> dict[str, Any]:
    """LangGraph + PostgresSaver in its default durability ("async") and in "sync"."""
    out: dict[str, Any] = {}
    lg = peers.LangGraphPg(dsn)
    try:
        for mode in ("async", "sync"):
            peers.langgraph_cycles(prof.warmup * 2, lg, mode)
            reps = []
            for _ in range(prof.reps):
                reps.append(_median(peers.langgraph_cycles(prof.peer_cycles, lg, mode)))
            x0 = next_xid(dsn)
            peers.langgraph_cycles(10, lg, mode)
            out[mode] = {"latency_ms": summary(reps, 1e3), "durability": mode,
                         "write_txns_per_cycle": round((next_xid(dsn) - x0) / 10, 2), "connection": lg.pragmas()}
            log(f"pg langgraph durability={mode}: {out[mode]['latency_ms']}")
    finally:
        lg.close()
    return out


def scenario_pg(base: Path, prof: Profile, per_cycle: int = 5) -> dict[str, Any]:
    """The daemon on synced LMDB vs on PostgreSQL, and LangGraph + PostgresSaver, one server."""
    with durable_server() as server:
        res: dict[str, Any] = {"server": server.settings(), "transitions_per_cycle": per_cycle}
        res["daemon"] = _daemons(base, prof, server.fresh_database("daemon"), per_cycle)
        res["langgraph_pg"] = _langgraph(server.fresh_database("langgraph"), prof)
    d, lg = res["daemon"], res["langgraph_pg"]
    pg_ms, lm_ms = d["cycle"]["pg"]["latency_ms"]["median"], d["cycle"]["lmdb"]["latency_ms"]["median"]
    res["pg_over_lmdb_cycle"] = round(pg_ms / lm_ms, 2)
    res["pg_over_langgraph_pg"] = {m: round(pg_ms / lg[m]["latency_ms"]["median"], 2) for m in lg}
    res["pg_over_lmdb_transitions"] = {
        str(c): round(d[f"transitions_{c}"]["pg"]["median"] / d[f"transitions_{c}"]["lmdb"]["median"], 2)
        for c in CLIENTS}
    log(f"pg: cycle pg/lmdb {res['pg_over_lmdb_cycle']}, pg/langgraph {res['pg_over_langgraph_pg']}, "
        f"transitions pg/lmdb {res['pg_over_lmdb_transitions']}")
    return res
