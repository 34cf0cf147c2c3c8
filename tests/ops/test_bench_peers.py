"""The benchmark's peer comparisons: LangGraph in both durability modes, single-threaded and
with 16 threads, on SQLite and on PostgreSQL, and the goal rows that read them. Every verdict is
checked to pass and to fail on made-up figures; nothing here measures time."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from bench import peers, pg, report


def _s(x: float, n: int = 3) -> dict[str, float]:
    return {"median": x, "min": x, "max": x, "n": n}


def _lg(ms: float, threads_16: float | None = None) -> dict[str, Any]:
    """A LangGraph figure as peers.measure_modes writes it."""
    fig: dict[str, Any] = {"latency_ms": _s(ms), "cycles_per_s": round(1e3 / ms, 1)}
    fig["best_cycles_per_s"], fig["best_of"] = fig["cycles_per_s"], "1 thread, 1 / median cycle"
    if threads_16 is not None:
        fig["threads_16"] = {"cycles_per_s": _s(threads_16), "threads": 16}
        if threads_16 > fig["cycles_per_s"]:
            fig["best_cycles_per_s"], fig["best_of"] = threads_16, "16 threads"
    return fig


def _sqlite_results(s1_ms: float, s2_rate: float, lg_async_ms: float, lg_sync_ms: float,
                    shipped_ms: float = 99.0, shipped_rate: float = 1.0,
                    threads: tuple[float | None, float | None] = (None, None)) -> dict[str, Any]:
    return {"scenarios": {
        "s1": {"tcp": {"latency_ms": _s(s1_ms)}, "unix": {"latency_ms": _s(s1_ms)},
               "aio_client_tcp": {"latency_ms": _s(shipped_ms)}},
        "s2": {"cycles_per_s": _s(s2_rate), "aio_client": {"cycles_per_s": _s(shipped_rate)}},
        "s3": {"langgraph_sqlite": _lg(lg_async_ms, threads[0]),
               "langgraph_sqlite_sync": _lg(lg_sync_ms, threads[1])},
    }}


def _verdicts(results: dict[str, Any], prefix: str) -> dict[str, str]:
    return {g["goal"]: g["status"] for g in report.goals(results) if g["goal"].startswith(prefix)}


def _by_mode(verdicts: dict[str, str], word: str = "") -> dict[str, str]:
    """{"async": status, "sync": status} of the goal rows (not the shown ones) containing ``word``."""
    out = {}
    for goal, status in verdicts.items():
        if "shipped" in goal or word not in goal or ("fused" in goal) != ("fused" in word):
            continue
        out["async" if "durability=async" in goal else "sync"] = status
    return out


def test_s1_is_judged_against_both_durability_modes() -> None:
    # LangGraph's async mode is faster than its sync mode: a daemon between the two meets only sync
    between = _by_mode(_verdicts(_sqlite_results(9.0, 100, lg_async_ms=8.0, lg_sync_ms=10.0), "S1 "))
    assert between == {"async": "MISSED", "sync": "met"}
    assert set(_by_mode(_verdicts(_sqlite_results(7.0, 100, 8.0, 10.0), "S1 ")).values()) == {"met"}
    # the figures: 23.5 ms against 10.6
    assert set(_by_mode(_verdicts(_sqlite_results(23.5, 100, 10.6, 11.0), "S1 ")).values()) == {"MISSED"}
    assert set(_by_mode(_verdicts({"scenarios": {}}, "S1 ")).values()) == {"not run"}


def test_s1_reads_the_interleaved_ratio_when_s3_ran_beside_the_daemon() -> None:
    # the medians of s1 and s3 were taken at different moments (1.2×); interleaved, the ratio is 0.9
    res = _sqlite_results(12.0, 100, lg_async_ms=10.0, lg_sync_ms=10.0)
    res["scenarios"]["s3"]["beside_daemon"] = {
        "reps": 7, "daemon_tcp": _s(9.0), "langgraph_async": _s(10.0), "langgraph_sync": _s(8.0),
        "daemon_over_langgraph_async": _s(0.9), "daemon_over_langgraph_sync": _s(1.12)}
    rows = {g["goal"]: g for g in report.goals(res)
            if g["goal"].startswith("S1 ") and "shipped" not in g["goal"] and "fused" not in g["goal"]}
    assert sorted((g["value"], g["status"]) for g in rows.values()) == [(0.9, "met"), (1.12, "MISSED")]
    assert all("ratio of medians 1.2" in g["detail"] for g in rows.values())


def test_the_fused_cycle_has_s1_s2_and_s4_rows_of_its_own() -> None:
    res = _sqlite_results(20.0, 100, lg_async_ms=10.0, lg_sync_ms=12.0)
    sc = res["scenarios"]
    sc["s1"]["fused_tcp"] = {"latency_ms": _s(11.0)}
    sc["s2"]["fused"] = {"cycles_per_s": _s(320.0)}
    sc["s4"] = {"cycle_over_parts_fused_tcp": 1.4, "cycle_over_parts_fused_unix": 1.6,
                "fused_anatomy": {"unary_rpcs_per_cycle": 2, "worker_roundtrips_per_cycle": 4,
                                  "write_txns_per_cycle": 6}}
    # 11 ms against 10 (async) and 12 (sync): only the sync row is met; the classic rows stay missed
    assert _by_mode(_verdicts(res, "S1 "), "fused") == {"async": "MISSED", "sync": "met"}
    assert set(_by_mode(_verdicts(res, "S1 ")).values()) == {"MISSED"}
    # 320/s against 100/s and 83.3/s: 3.2× and 3.8×
    assert set(_by_mode(_verdicts(res, "S2 "), "fused").values()) == {"met"}
    s4 = _verdicts(res, "S4 fused")
    assert s4 == {"S4 fused cycle ≤ 1.5× sum of its parts (tcp)": "met",
                  "S4 fused cycle ≤ 1.5× sum of its parts (unix)": "MISSED"}
    # interleaved beside LangGraph, the paired ratio wins over the medians
    sc["s3"]["beside_daemon"] = {"fused_over_langgraph_async": _s(0.95), "fused_over_langgraph_sync": _s(0.8)}
    assert set(_by_mode(_verdicts(res, "S1 "), "fused").values()) == {"met"}
    assert set(_by_mode(_verdicts({"scenarios": {}}, "S1 "), "fused").values()) == {"not run"}


def test_s2_reads_the_better_of_one_and_sixteen_langgraph_threads() -> None:
    # one thread: 1 / 10 ms = 100/s; 3× is 300/s
    one = _by_mode(_verdicts(_sqlite_results(9.0, 310, 10.0, 10.0), "S2 "))
    assert one == {"async": "met", "sync": "met"}
    # 16 threads reach 150/s in async mode only: the bar there becomes 450/s
    threaded = _sqlite_results(9.0, 310, 10.0, 10.0, threads=(150.0, 60.0))
    assert _by_mode(_verdicts(threaded, "S2 ")) == {"async": "MISSED", "sync": "met"}
    row = next(g for g in report.goals(threaded) if g["goal"].startswith("S2 ") and "async" in g["goal"]
               and "shipped" not in g["goal"])
    assert row["value"] == round(310 / 150, 2) and "16 threads" in row["detail"]
    # the figure: 1.15× instead of 3×
    assert set(_by_mode(_verdicts(_sqlite_results(9.0, 115, 10.0, 10.0), "S2 ")).values()) == {"MISSED"}


def test_the_shipped_asyncio_client_is_shown_never_missed() -> None:
    slow = _verdicts(_sqlite_results(7.0, 400, 10.0, 10.0, shipped_ms=30.0, shipped_rate=50.0), "S")
    shown = {g: v for g, v in slow.items() if "shipped" in g}
    assert len(shown) == 4 and set(shown.values()) == {"shown (outside the bar)"}
    fast = _verdicts(_sqlite_results(7.0, 400, 10.0, 10.0, shipped_ms=5.0, shipped_rate=400.0), "S")
    assert {v for g, v in fast.items() if "shipped" in g} == {"shown (within the bar)"}
    assert "MISSED" not in {v for g, v in slow.items() if "shipped" not in g}


def test_peer_rate_falls_back_to_one_over_the_median_for_older_results() -> None:
    assert report.peer_rate({"latency_ms": _s(8.0)}) == (125.0, "1 thread, 1 / median cycle")
    assert report.peer_rate(_lg(10.0, 150.0)) == (150.0, "16 threads")
    assert report.peer_rate(None) == (None, "")


def _pg_results(pg_ms: float, lg_async_ms: float, lg_sync_ms: float, c16: float, commit_ms: float,
                lg_threads: float | None = None, with_s4: bool = True) -> dict[str, Any]:
    anatomy = {"unary_rpcs_per_cycle": 4, "worker_roundtrips_per_cycle": 4, "write_txns_per_cycle": 7}
    scen: dict[str, Any] = {"pg": {
        "daemon": {"cycle": {"pg": {"latency_ms": _s(pg_ms)}, "lmdb": {"latency_ms": _s(pg_ms)},
                             "pg_commit_ms": _s(commit_ms),
                             "pg_over": {"langgraph_async": _s(pg_ms / lg_async_ms),
                                         "langgraph_sync": _s(pg_ms / lg_sync_ms)}},
                   "anatomy": {"pg": anatomy}},
        "cycles_per_s_16": {"pg": _s(c16)},
        "langgraph_pg": {"async": _lg(lg_async_ms, lg_threads), "sync": _lg(lg_sync_ms, lg_threads)},
    }}
    if with_s4:
        scen["s4"] = {"echo": {"tcp": {"unary_ms": _s(0.25), "stream_roundtrip_ms": _s(0.15)}}}
    return {"scenarios": scen}


def test_s1_pg_and_s2_pg_pass_and_fail() -> None:
    ok = _pg_results(12.0, lg_async_ms=15.0, lg_sync_ms=16.0, c16=250, commit_ms=1.0)
    assert set(_by_mode(_verdicts(ok, "S1-PG")).values()) == {"met"}
    assert set(_by_mode(_verdicts(ok, "S2-PG")).values()) == {"met"}  # 250 ≥ 3 × 66.7 and 3 × 62.5
    # an earlier full run on PostgreSQL: 20.1 ms vs 19.4 (async) and 18.5 (sync)
    slow = _pg_results(20.1, 19.4, 18.5, c16=100, commit_ms=1.0)
    assert set(_by_mode(_verdicts(slow, "S1-PG")).values()) == {"MISSED"}
    assert set(_by_mode(_verdicts(slow, "S2-PG")).values()) == {"MISSED"}
    # LangGraph with 16 threads at 120/s raises the bar to 360/s
    threaded = _pg_results(12.0, 15.0, 16.0, c16=250, commit_ms=1.0, lg_threads=120.0)
    assert set(_by_mode(_verdicts(threaded, "S2-PG")).values()) == {"MISSED"}
    detail = next(g["detail"] for g in report.goals(ok) if g["goal"].startswith("S1-PG"))
    assert "per-repetition ratios" in detail
    # alternating repetitions: the paired ratio is the value, not the ratio of the two medians
    paired = _pg_results(16.0, 15.0, 15.0, c16=250, commit_ms=1.0)
    cycle = paired["scenarios"]["pg"]["daemon"]["cycle"]
    cycle["pg_over"] = {"langgraph_async": {"median": 0.95, "min": 0.9, "max": 1.2, "n": 3},
                        "langgraph_sync": {"median": 1.05, "min": 0.9, "max": 1.2, "n": 3}}
    rows = {g["goal"]: g for g in report.goals(paired) if g["goal"].startswith("S1-PG")}
    assert sorted((g["value"], g["status"]) for g in rows.values()) == [(0.95, "met"), (1.05, "MISSED")]


def test_s4_pg_sums_the_measured_parts() -> None:
    # 4 × 0.25 + 4 × 0.15 + 7 × 1.0 = 8.6 ms
    total, parts = report.pg_parts(_pg_results(12.0, 15, 16, 250, commit_ms=1.0)["scenarios"])
    assert total == pytest.approx(8.6) and parts["txns"] == 7
    met = _verdicts(_pg_results(12.0, 15, 16, 250, commit_ms=1.0), "S4-PG")
    assert list(met.values()) == ["met"]  # 12 / 8.6 = 1.40
    missed = _verdicts(_pg_results(14.0, 15, 16, 250, commit_ms=1.0), "S4-PG")
    assert list(missed.values()) == ["MISSED"]  # 14 / 8.6 = 1.63
    # each repetition's cycle against its own commit sample: a slow-disk repetition is read with its
    # slow commits (parts 8.6 and 15.6 ms), not against the run's median commit
    weather = _pg_results(14.0, 15, 16, 250, commit_ms=1.0)
    cycle = weather["scenarios"]["pg"]["daemon"]["cycle"]
    cycle["pg_reps_ms"], cycle["pg_commit_reps_ms"] = [12.0, 21.0, 14.0], [1.0, 2.0, 1.0]
    total, parts = report.pg_parts(weather["scenarios"])
    assert parts["paired"] == {"median": 1.4, "min": 1.35, "max": 1.63, "n": 3}
    row = next(g for g in report.goals(weather) if g["goal"].startswith("S4-PG"))
    assert (row["value"], row["status"]) == (1.4, "met") and "per-repetition" in row["detail"]
    cycle["pg_reps_ms"] = [14.0, 21.0, 14.0]
    row = next(g for g in report.goals(weather) if g["goal"].startswith("S4-PG"))
    assert (row["value"], row["status"]) == (1.63, "MISSED")
    # without s4's echo in the run there is no floor to compare with
    alone = _pg_results(12.0, 15, 16, 250, 1.0, with_s4=False)
    assert list(_verdicts(alone, "S4-PG").values()) == ["not run"]


def test_alternating_orders_put_no_variant_always_first() -> None:
    assert [peers.alternate(peers.MODES, r) for r in range(2)] == [("async", "sync"), ("sync", "async")]
    names = ("lmdb", "pg", "langgraph_async", "langgraph_sync")
    firsts = [pg._order(r, names)[0] for r in range(8)]
    assert sorted(firsts) == sorted(names * 2)
    assert [pg._order(r) for r in range(2)] == [("lmdb", "pg"), ("pg", "lmdb")]
    assert pg.cycles_from_transitions({"median": 500.0, "min": 400.0, "max": 600.0, "n": 3}, 5) == \
        {"median": 100.0, "min": 80.0, "max": 120.0, "n": 3}


class _FakeGraph:
    """Stands in for a LangGraph lane: records which thread ran its cycles; can fail on the n-th."""

    def __init__(self, fail_at: int = 0) -> None:
        self.threads: set[str] = set()
        self.cycles = 0
        self.fail_at = fail_at

    def cycle(self, durability: str | None = None) -> None:
        self.cycles += 1
        self.threads.add(threading.current_thread().name)
        if self.fail_at and self.cycles == self.fail_at:
            raise ValueError("boom")


def test_langgraph_threaded_runs_exactly_total_cycles_one_thread_per_lane() -> None:
    lanes = [_FakeGraph() for _ in range(4)]
    assert peers.langgraph_threaded(lanes, 37, "sync") >= 0  # type: ignore[arg-type]
    assert sum(lane.cycles for lane in lanes) == 37
    assert all(len(lane.threads) <= 1 for lane in lanes)
    with pytest.raises(RuntimeError, match="4 threads failed: ValueError"):
        peers.langgraph_threaded([_FakeGraph(fail_at=2) for _ in range(4)], 40)  # type: ignore[misc]


def test_anatomy_counts_rpcs_round_trips_and_transactions() -> None:
    """The RPCs are the driver's own count by method (each verb of the client is one unary RPC),
    taken as a difference: the warm-up cycle and whatever came before are left out."""

    class Counters:
        llm_calls = 0
        tool_calls = 0

    txns = [100]

    class FakeDaemon:
        counters = Counters()
        rpcs: dict[str, int] = {"Snapshot": 3}

        async def cycle(self) -> None:
            self.rpcs["Spawn"] = self.rpcs.get("Spawn", 0) + 2
            self.counters.llm_calls += 2
            self.counters.tool_calls += 1
            txns[0] += 5

    an = asyncio.run(pg._anatomy(FakeDaemon(), lambda: txns[0], n=4))  # type: ignore[arg-type]
    assert an == {"write_txns_per_cycle": 5.0, "worker_roundtrips_per_cycle": 3.0,
                  "unary_rpcs_per_cycle": 2.0, "rpcs": {"Spawn": 2.0}}


def test_alternations_give_every_variant_a_turn_in_every_repetition() -> None:
    import dataclasses

    from bench.scenarios import QUICK

    prof = dataclasses.replace(QUICK, warmup=1, reps=4, interleaved_reps=4, cycles=3, transition_secs=0.01)
    turns: list[str] = []

    class FakeDaemon:
        def __init__(self, name: str) -> None:
            self.name = name

        async def cycle(self, phases: dict[str, list[float]] | None = None) -> str:
            turns.append(self.name)
            await asyncio.sleep(0)
            return "h"

    class FakeLangGraph:
        def cycle(self, durability: str | None = None) -> None:
            turns.append(f"langgraph_{durability}")

    class Floor:
        samples = iter([1.0, 2.0, 3.0, 4.0])

        def sample(self) -> float:
            return next(self.samples)

    loop = asyncio.new_event_loop()
    try:
        ds = {"lmdb": FakeDaemon("lmdb"), "pg": FakeDaemon("pg")}
        res = pg._cycles(loop, ds, FakeLangGraph(), prof, Floor())  # type: ignore[arg-type]
    finally:
        loop.close()
    assert res["pg_commit_reps_ms"] == [1.0, 2.0, 3.0, 4.0] and len(res["pg_reps_ms"]) == 4
    assert set(res["pg_over"]) == {"lmdb", "langgraph_async", "langgraph_sync"}
    assert res["pg_over"]["lmdb"]["n"] == 4 and res["interleaved"] == {"reps": 4, "cycles_per_rep": 3}
    # one warm-up cycle each, then 4 repetitions of 3 rounds, a round one cycle of each
    assert {n: turns.count(n) for n in set(turns)} == {n: 1 + 4 * 3 for n in
                                                        ("lmdb", "pg", "langgraph_async", "langgraph_sync")}

    peer_calls: list[int] = []

    def peer() -> float:
        peer_calls.append(1)
        return 10.0

    ds = {"lmdb": FakeDaemon("lmdb"), "pg": FakeDaemon("pg")}
    out = asyncio.run(pg._rates(ds, 2, prof, 5, {"langgraph_sync_threads": peer}))  # type: ignore[arg-type]
    assert len(peer_calls) == 4 and out["peers"]["langgraph_sync_threads"]["median"] == 10.0
    # the daemon's cycles/s (transitions/s ÷ 5) over the peer's 10/s, per repetition
    paired = out["pg_over"]["langgraph_sync_threads"]["median"]
    assert paired == pytest.approx(out["pg"]["median"] / 50, rel=0.5)
    assert set(out) == {"lmdb", "pg", "peers", "pg_over"}


def test_the_table_shows_the_new_peer_rows() -> None:
    from pathlib import Path

    res = _sqlite_results(9.0, 300, 8.0, 10.0, threads=(50.0, 60.0))
    res["scenarios"]["s3"]["beside_daemon"] = {
        "reps": 7, "cycles_per_rep": 20, "daemon_tcp": _s(9.0), "langgraph_async": _s(10.0),
        "langgraph_sync": _s(8.0), "daemon_over_langgraph_async": _s(0.9),
        "daemon_over_langgraph_sync": _s(1.12)}
    pg_part = _pg_results(12.0, 15.0, 16.0, 250, 1.0, lg_threads=40.0)["scenarios"]
    pg_res = pg_part["pg"]
    pg_res.update({"server": {}, "pg_over_lmdb_transitions": {}, "transitions_per_cycle": 5})
    pg_res["daemon"]["write_txns_per_cycle"] = {"lmdb": 7, "pg": 7}
    pg_res["daemon"]["anatomy"]["pg"]["rpcs"] = {"Spawn": 1.0}
    for store in ("lmdb", "pg"):
        pg_res["daemon"]["cycle"][store]["phases_ms"] = {}
    for mode in ("async", "sync"):
        pg_res["langgraph_pg"][mode]["write_txns_per_cycle"] = 11
    res["scenarios"].update(pg_part)
    res.update({"profile": {"name": "quick", "reps": 3}, "elapsed_s": 1, "goals": report.goals(res),
                "machine": {"cores": 2, "cpu": "x", "memory_gib": 1, "python": "3.11",
                            "loadavg_at_start": [0], "git": "abc", "versions": {}}})
    table = report.render(res, Path("run.json"))
    for text in ("durability=sync, 16 threads (a saver each) | 60 |",
                 "shipped asyncio client (toolnexus_client.aio)", "daemon, PostgreSQL, 16 asyncio tasks",
                 "one durable PostgreSQL commit", "Peers beside the daemon",
                 "PostgreSQL cycle anatomy (measured): 4 unary RPCs", "S4-PG cycle ≤ 1.5×",
                 "S2-PG 16 clients"):
        assert text in table, text
