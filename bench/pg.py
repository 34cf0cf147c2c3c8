"""The PostgreSQL figures: the daemon's cycle and transitions/s on PostgreSQL beside LMDB, and LangGraph
with its PostgreSQL checkpointer as the peer, in one run on one embedded server.

One durable PostgreSQL 18 server (``pg_server.DurablePg``: the tests' embedded
server with fsync on, unix socket only) serves a database for the daemon and
another for LangGraph. Two daemons run at once, one on synced LMDB and one with
``--store postgresql://…`` (synchronous_commit on), and their repetitions
alternate (LMDB, PG, then PG, LMDB, …): on a shared, noisy 2-core machine a burst
of someone else's load then falls on both sides, not on one, and the ratios
stay meaningful. The sequential cycles of both daemons and of LangGraph with
PostgresSaver (its own database of the same server) in both durability modes are
interleaved cycle by cycle (``bench/interleave.py``), so the S1-PG ratios are per
repetition. Write transactions, worker round trips and unary RPCs per cycle
are counted on both stores (LMDB's ``last_txnid``, the server's next transaction id,
the worker's counters, a counting stub), and one durable commit of the store's shape
is sampled after every repetition: the parts of S4-PG. S2-PG: 16 concurrent clients
on each store against LangGraph's best of one thread and 16 threads.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from toolnexus_daemon.store.postgres.write import SQL, _write

from . import interleave, peers
from .common import daemon, log, summary, tcp_target
from .driver import Daemon, run_concurrent
from .pg_server import durable_server, next_xid
from .scenarios import Profile, _txn_id

STORES = ("lmdb", "pg")
CLIENTS = (1, 8, 16, 64)
S2_CLIENTS = 16

def _order(rep: int, names: tuple[str, ...] = STORES) -> tuple[str, ...]:
    """The order of a repetition, rotated by one every repetition, so no variant is always first
    (two variants alternate: LMDB, PG, then PG, LMDB…)."""
    k = rep % len(names)
    return names[k:] + names[:k]


def _cycles(loop: asyncio.AbstractEventLoop, ds: dict[str, Daemon], lg: peers.LangGraph, prof: Profile,
            floor: Any = None) -> dict[str, Any]:
    """Sequential cycles of the two daemons and of LangGraph in both durability modes, interleaved cycle
    by cycle (bench/interleave.py: a round is one cycle of each in a rotated order, so a slow-disk
    window falls on all four): latency and phases (ms), the per-repetition ratios of the PostgreSQL
    cycle to each other variant, and — with ``floor`` — the durable commit sampled after each
    repetition (ms), kept per repetition so S4-PG can be read per repetition too."""
    variants: dict[str, interleave.Variant] = {
        store: interleave.aio_variant(loop, d) for store, d in ds.items()}
    for mode in peers.MODES:
        variants[f"langgraph_{mode}"] = lambda n, phases, mode=mode: peers.langgraph_cycles(n, lg, mode)
    res = interleave.run(variants, warmup=prof.warmup, reps=prof.interleaved_reps, cycles=prof.cycles,
                         probe=floor, label="pg")
    out: dict[str, Any] = {name: interleave.figure(res, name) for name in variants}
    out["pg_over"] = {name: interleave.paired_ratio(res, "pg", name) for name in variants if name != "pg"}
    out["interleaved"] = {"reps": prof.interleaved_reps, "cycles_per_rep": prof.cycles}
    if res["commit_probe_ms"]:
        out["pg_commit_ms"] = summary(res["commit_probe_ms"], 1.0, 4)
        out["pg_commit_reps_ms"] = list(res["commit_probe_ms"])
        out["pg_reps_ms"] = [round(x * 1e3, 3) for x in res["reps_s"]["pg"]]
    return out


async def _rates(ds: dict[str, Daemon], clients: int, prof: Profile, per_cycle: int,
                 peer_rates: dict[str, Callable[[], float]] | None = None) -> dict[str, Any]:
    """Transitions/s with ``clients`` concurrent clients per store, repetitions alternating; with
    ``peer_rates`` (one repetition of a peer → its cycles/s, run inline on the loop) the peers take
    their turn in every repetition too, under ``peers`` (cycles/s), and ``pg_over`` holds the
    per-repetition ratios of the PostgreSQL daemon's cycles/s to each peer's."""
    per_rep: dict[str, int] = {}
    for store, d in ds.items():
        await run_concurrent(clients, max(prof.warmup, clients), lambda i, d=d: d.cycle())
        n = max(clients, 8)
        elapsed = await run_concurrent(clients, n, lambda i, d=d: d.cycle())
        per_rep[store] = max(clients, int(n / elapsed * prof.transition_secs))
    extra = peer_rates or {}
    names = (*ds, *extra)
    rates: dict[str, list[float]] = {k: [] for k in names}
    for rep in range(prof.reps):
        for name in _order(rep, names):
            if name in extra:
                rates[name].append(extra[name]())
                continue
            d = ds[name]
            elapsed = await run_concurrent(clients, per_rep[name], lambda i, d=d: d.cycle())
            rates[name].append(per_rep[name] / elapsed * per_cycle)
    out: dict[str, Any] = {store: summary(rates[store], 1.0, 1) for store in ds}
    if extra:
        out["peers"] = {name: summary(rates[name], 1.0, 1) for name in extra}
        out["pg_over"] = {name: summary([p / per_cycle / r
                                         for p, r in zip(rates["pg"], rates[name], strict=True)],
                                        1.0, 3) for name in extra}
    return out


async def _anatomy(d: Daemon, count: Callable[[], int], n: int = 10) -> dict[str, Any]:
    """Write transactions (``count``: LMDB's last txn id or the server's next xid), worker round trips
    and unary RPCs per cycle, averaged over ``n`` cycles after one."""
    await d.cycle()
    rpcs0 = dict(d.rpcs)
    calls0 = d.counters.llm_calls + d.counters.tool_calls
    before = count()
    for _ in range(n):
        await d.cycle()
    txns = count() - before
    calls1 = d.counters.llm_calls + d.counters.tool_calls
    rpcs = {k: v - rpcs0.get(k, 0) for k, v in d.rpcs.items() if v > rpcs0.get(k, 0)}
    return {"write_txns_per_cycle": round(txns / n, 2),
            "worker_roundtrips_per_cycle": round((calls1 - calls0) / n, 2),
            "unary_rpcs_per_cycle": round(sum(rpcs.values()) / n, 2),
            "rpcs": {k: round(v / n, 2) for k, v in sorted(rpcs.items())}}


def _median(values: list[float]) -> float:
    import statistics

    return statistics.median(values)


def commit_ops(rid: str, n: int, value: bytes) -> list[tuple[str, list[tuple[Any, ...]]]]:
    """The statements of the store's usual commit (``postgres.write.SQL``): a handle with its index columns,
    two transcript messages, its checkpoint and two events; the ``n``-th commit of runtime ``rid``
    (handle ids cycle over 64, message indexes and event seqs grow). Index columns beyond those the
    benchmark knows (state, open kind, since) are NULL, so a new column does not break the floor."""
    hid = f"h{n % 64:04d}"
    known: tuple[Any, ...] = (rid, hid, value, False, "suspended", "approval", time.time())
    handle = known + (None,) * (SQL["handles"].count("%s") - len(known))
    return [(SQL["handles"], [handle]),
            (SQL["messages"], [(rid, hid, n * 2, value), (rid, hid, n * 2 + 1, value)]),
            (SQL["checkpoints"], [(rid, hid, value)]),
            (SQL["events"], [(rid, n * 2 - 1, value), (rid, n * 2, value)])]


class CommitFloor:
    """One durable PostgreSQL commit of the store's shape (``commit_ops``, ~500-byte values) written by
    ``postgres.write._write`` as the daemon's writer does (one transaction, one pipeline), on the calling
    thread, over the server's unix socket, synchronous_commit on: the S4-PG floor."""

    def __init__(self, dsn: str, commits: int) -> None:
        import psycopg

        from toolnexus_daemon.store.postgres import schema as pg_schema

        self.conn = psycopg.connect(dsn, autocommit=True)
        pg_schema.migrate(self.conn, "benchmark commit floor")
        self.conn.execute(b"SET synchronous_commit = on")
        self.value = os.urandom(500)
        self.n = 0
        self.commits = commits
        for _ in range(20):
            self._one()

    def _one(self) -> float:
        self.n += 1
        steps = commit_ops("rt-floor", self.n, self.value)
        t0 = time.perf_counter()
        _write(self.conn, steps)  # one batch's statements as (sql, rows), as the store's writer runs them
        return time.perf_counter() - t0

    def sample(self) -> float:
        """The median ms of ``commits`` commits in a row."""
        return _median([self._one() for _ in range(self.commits)]) * 1e3

    def close(self) -> None:
        self.conn.close()


def _threaded_rate(lanes: list[peers.LangGraph], total: int, mode: str) -> Callable[[], float]:
    return lambda: total / peers.langgraph_threaded(lanes, total, mode)


def _daemons(base: Path, prof: Profile, dsn: str, per_cycle: int, lg: peers.LangGraph,
             lanes: list[peers.LangGraph], floor: CommitFloor) -> dict[str, Any]:
    out: dict[str, Any] = {}
    loop = asyncio.new_event_loop()
    try:
        with daemon(base, name="pg-lmdb", unix=False) as lm, \
                daemon(base, "--store", dsn, name="pg-pg", unix=False) as pgd:
            ds = {"lmdb": interleave.on_loop(loop, Daemon.connect(tcp_target(lm))),
                  "pg": interleave.on_loop(loop, Daemon.connect(tcp_target(pgd)))}
            try:
                out["cycle"] = _cycles(loop, ds, lg, prof, floor)
                names = (*ds, *(f"langgraph_{m}" for m in peers.MODES))
                log("pg cycle: " + ", ".join(f"{k} {out['cycle'][k]['latency_ms']}" for k in names)
                    + f"; commit floor {out['cycle'].get('pg_commit_ms')} ms")
                counters = {"lmdb": lambda: _txn_id(lm.data_dir), "pg": lambda: next_xid(dsn)}
                out["anatomy"] = {k: interleave.on_loop(loop, _anatomy(ds[k], counters[k])) for k in ds}
                out["write_txns_per_cycle"] = {k: v["write_txns_per_cycle"]
                                               for k, v in out["anatomy"].items()}
                for mode in peers.MODES:  # warm the lanes: connections, statements, pages
                    peers.langgraph_threaded(lanes, len(lanes) * 2, mode)
                for clients in CLIENTS:
                    threaded = {f"langgraph_{m}_threads": _threaded_rate(lanes, prof.concurrent_cycles, m)
                                for m in peers.MODES} if clients == S2_CLIENTS else None
                    out[f"transitions_{clients}"] = interleave.on_loop(
                        loop, _rates(ds, clients, prof, per_cycle, threaded))
                    log(f"pg transitions x{clients}: {out[f'transitions_{clients}']}")
            finally:
                for d in ds.values():
                    interleave.on_loop(loop, d.close())
    finally:
        loop.close()
    return out


def _langgraph(dsn: str, lg: peers.LangGraph, d: dict[str, Any]) -> dict[str, Any]:
    """LangGraph + PostgresSaver in its default durability ("async") and in "sync", from its turns in
    the daemons' alternations (``d``): the latency, cycles/s with one thread (1 / median) and with 16
    threads (a saver and a connection each), the better of the two as the peer's throughput; and its
    write transactions per cycle."""
    out: dict[str, Any] = {}
    for mode in peers.MODES:
        x0 = next_xid(dsn)
        peers.langgraph_cycles(10, lg, mode)
        fig: dict[str, Any] = {"latency_ms": d["cycle"][f"langgraph_{mode}"]["latency_ms"],
                               "durability": mode,
                               "write_txns_per_cycle": round((next_xid(dsn) - x0) / 10, 2),
                               "connection": lg.pragmas()}
        fig["cycles_per_s"] = round(1e3 / fig["latency_ms"]["median"], 1)
        threaded = d[f"transitions_{S2_CLIENTS}"]["peers"][f"langgraph_{mode}_threads"]
        fig[f"threads_{S2_CLIENTS}"] = {"cycles_per_s": threaded, "threads": S2_CLIENTS,
                                        "how": "one thread per lane, a saver and a connection each"}
        best = threaded["median"] > fig["cycles_per_s"]
        fig["best_cycles_per_s"] = threaded["median"] if best else fig["cycles_per_s"]
        fig["best_of"] = f"{S2_CLIENTS} threads" if best else "1 thread, 1 / median cycle"
        out[mode] = fig
        log(f"pg langgraph durability={mode}: {fig['latency_ms']}, {fig['cycles_per_s']}/s single, "
            f"{threaded['median']}/s with {S2_CLIENTS} threads")
    return out


def scenario_pg(base: Path, prof: Profile, per_cycle: int = 5) -> dict[str, Any]:
    """The daemon on synced LMDB vs on PostgreSQL, LangGraph + PostgresSaver (both durability modes)
    alternating with them, and the durable commit floor, on one server."""
    with durable_server() as server:
        res: dict[str, Any] = {"server": server.settings(), "transitions_per_cycle": per_cycle}
        lg_dsn = server.fresh_database("langgraph")
        lg = peers.LangGraphPg(lg_dsn)
        lanes: list[peers.LangGraph] = []
        floor = CommitFloor(server.fresh_database("floor"), max(10, prof.floor_calls // 4))
        try:
            lanes.extend(peers.LangGraphPg(lg_dsn) for _ in range(S2_CLIENTS))
            res["daemon"] = _daemons(base, prof, server.fresh_database("daemon"), per_cycle, lg, lanes, floor)
            res["langgraph_pg"] = _langgraph(lg_dsn, lg, res["daemon"])
        finally:
            floor.close()
            for one in (lg, *lanes):
                one.close()
    d, lg_res = res["daemon"], res["langgraph_pg"]
    pg_ms, lm_ms = d["cycle"]["pg"]["latency_ms"]["median"], d["cycle"]["lmdb"]["latency_ms"]["median"]
    res["pg_over_lmdb_cycle"] = round(pg_ms / lm_ms, 2)
    res["pg_over_langgraph_pg"] = {m: round(pg_ms / lg_res[m]["latency_ms"]["median"], 2) for m in lg_res}
    res["pg_over_lmdb_transitions"] = {
        str(c): round(d[f"transitions_{c}"]["pg"]["median"] / d[f"transitions_{c}"]["lmdb"]["median"], 2)
        for c in CLIENTS}
    res["cycles_per_s_16"] = {store: cycles_from_transitions(d[f"transitions_{S2_CLIENTS}"][store], per_cycle)
                              for store in STORES}
    log(f"pg: cycle pg/lmdb {res['pg_over_lmdb_cycle']}, pg/langgraph {res['pg_over_langgraph_pg']}, "
        f"transitions pg/lmdb {res['pg_over_lmdb_transitions']}, "
        f"16 clients cycles/s {res['cycles_per_s_16']}")
    return res


def cycles_from_transitions(rates: dict[str, Any], per_cycle: int) -> dict[str, Any]:
    """A transitions/s summary as cycles/s (each cycle is ``per_cycle`` transitions)."""
    return {k: (round(v / per_cycle, 1) if k != "n" else v) for k, v in rates.items()}
