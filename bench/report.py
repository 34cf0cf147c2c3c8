"""Turn a results dict into the goal verdicts and the Markdown table of ``bench/README.md``."""

from __future__ import annotations

import re
import statistics
from pathlib import Path
from typing import Any

from .common import ROOT

README = ROOT / "bench" / "README.md"


def _get(d: dict[str, Any], *path: str) -> Any:
    for key in path:
        if not isinstance(d, dict) or key not in d:
            return None
        d = d[key]
    return d


def _paired_note(ratio: dict[str, Any] | None) -> str:
    """How the ratio was taken, when it was: the median of per-repetition ratios of interleaved cycles."""
    if not ratio:
        return ""
    return f"; median of {ratio['n']} interleaved per-repetition ratios, range {ratio['min']}–{ratio['max']}"


def goals(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Each goal of bench/README.md: what was measured, the bar, met / missed / not run."""
    s = {k: v for k, v in results["scenarios"].items() if "error" not in v}
    out: list[dict[str, Any]] = []

    def add(goal: str, value: float | None, bar: str, ok: bool | None, detail: str,
            shown: bool = False) -> None:
        status = "not run" if ok is None else ("met" if ok else "MISSED")
        if shown and ok is not None:  # a figure beside a goal, not a goal: it never counts as a miss
            status = f"shown ({'within' if ok else 'outside'} the bar)"
        out.append({"goal": goal, "value": value, "bar": bar, "status": status, "detail": detail})

    _cycle_goals(s, add)
    for transport in ("tcp", "unix"):
        r = _get(s, "s4", f"snapshot_over_echo_{transport}")
        add(f"S4 Snapshot ≤ 1.3× echo ({transport})", r, "≤ 1.3", None if r is None else r <= 1.3,
            f"Snapshot {_get(s, 's4', f'snapshot_{transport}_ms', 'median')} ms vs echo "
            f"{_get(s, 's4', 'echo', transport, 'unary_ms', 'median')} ms")
    for transport in ("tcp", "unix"):
        r = _get(s, "s4", f"cycle_over_parts_{transport}")
        an = _get(s, "s4", "anatomy") or {}
        add(f"S4 cycle ≤ 1.5× sum of its parts ({transport})", r, "≤ 1.5", None if r is None else r <= 1.5,
            f"parts {_get(s, 's4', f'sum_of_parts_{transport}_ms')} ms = "
            f"{an.get('unary_rpcs_per_cycle')} RPCs + "
            f"{an.get('worker_roundtrips_per_cycle')} worker round trips at echo cost + "
            f"{an.get('write_txns_per_cycle')} synced commits × "
            f"{_get(s, 's4', 'lmdb', 'synced_commit_ms', 'median')} ms")
    for transport in ("tcp", "unix"):
        r = _get(s, "s4", f"cycle_over_parts_fused_{transport}")
        an = _get(s, "s4", "fused_anatomy") or {}
        add(f"S4 fused cycle ≤ 1.5× sum of its parts ({transport})", r, "≤ 1.5",
            None if r is None else r <= 1.5,
            f"parts {_get(s, 's4', f'sum_of_parts_fused_{transport}_ms')} ms = "
            f"{an.get('unary_rpcs_per_cycle')} RPCs + "
            f"{an.get('worker_roundtrips_per_cycle')} worker round trips + "
            f"{an.get('write_txns_per_cycle')} synced commits")
    sm = _get(s, "s5", "summary") or {}
    levels = sm.get("levels") or ["?", "?"]
    r = sm.get("cycle_ratio_hi_over_lo")
    add(f"S5 daemon cycle at {levels[1]} parked ≤ 1.2× at {levels[0]}", r, "≤ 1.2",
        None if r is None else r <= 1.2,
        f"{_get(s, 's5', 'daemon', levels[1], 'latency_ms', 'median')} ms vs "
        f"{_get(s, 's5', 'daemon', levels[0], 'latency_ms', 'median')} ms"
        + _paired_note(_get(s, "s5", "interleaved", "cycle_hi_over_lo")))
    r = sm.get("daemon_hi_over_reference_hi")
    add(f"S5 daemon durable cycle < reference in-memory cycle at {levels[1]}", r, "< 1.0",
        None if r is None else r < 1.0,
        f"daemon {_get(s, 's5', 'daemon', levels[1], 'latency_ms', 'median')} ms vs reference "
        f"{_get(s, 's5', 'reference', levels[1], 'latency_ms', 'median')} ms")
    f6 = _get(s, "s6", "fraction_of_ideal")
    rss6 = _get(s, "s6", "daemon_peak_rss_mib")
    add("S6 turns/s ≥ 80% of max_concurrent_turns/0.05 s", f6, "≥ 0.80", None if f6 is None else f6 >= 0.8,
        f"{_get(s, 's6', 'turns_per_s', 'median')} turns/s vs ideal {_get(s, 's6', 'ideal_turns_per_s')} "
        f"({_get(s, 's6', 'handles')} handles)")
    add("S6 daemon RSS < 300 MB", rss6, "< 286 MiB", None if rss6 is None else rss6 * (1 << 20) < 300e6,
        f"peak RSS {rss6} MiB")
    r = sm.get("resume_ratio_hi_over_lo")
    add(f"I4 Resume latency at {levels[1]} parked ≤ 1.2× at {levels[0]}", r, "≤ 1.2",
        None if r is None else r <= 1.2,
        f"{_get(s, 's5', 'daemon', levels[1], 'phases_ms', 'resume_done')} ms vs "
        f"{_get(s, 's5', 'daemon', levels[0], 'phases_ms', 'resume_done')} ms"
        + _paired_note(_get(s, "s5", "interleaved", "resume_hi_over_lo")))
    g = sm.get("rss_growth_bytes_per_parked_after_restart")
    add("I4 RSS growth ≤ 2 KB per parked handle (restarted daemon)", g, "≤ 2048 B",
        None if g is None else g <= 2048,
        f"of which anonymous {sm.get('rss_anon_growth_bytes_per_parked_after_restart')} B and LMDB map pages "
        f"{sm.get('rss_file_growth_bytes_per_parked_after_restart')} B; "
        f"creating daemon: {sm.get('rss_growth_bytes_per_parked_creator')} B/handle")
    tr = _get(s, "tr") or {}
    r = tr.get("synced_64_over_synced_1")
    add("I4 group commit lifts synced transitions/s with concurrency (64 vs 1 clients)", r, "> 1.0",
        None if r is None else r > 1.0,
        f"synced 1: {_get(tr, 'synced_1', 'median')}/s, 64: {_get(tr, 'synced_64', 'median')}/s; "
        f"synced/no-sync at 64: {tr.get('synced_over_no_sync_64')}")
    _transport_goals(s, add)
    _pg_goals(s, add)
    _pg_cycle_goals(s, add)
    _pg_scale_goal(s, add)
    _cluster_goals(s, add)
    return out


MODE_LABEL = {"async": "durability=async, LangGraph's default", "sync": "durability=sync, like-for-like"}
SQLITE_KEYS = {"async": "langgraph_sqlite", "sync": "langgraph_sqlite_sync"}


def ratio(num: float | None, den: float | None) -> float | None:
    """``num / den`` to two places, or None when either is missing (or zero)."""
    return round(num / den, 2) if num and den else None


def peer_rate(fig: dict[str, Any] | None) -> tuple[float | None, str]:
    """A LangGraph figure's cycles/s and how it was taken: the better of one thread (1 / median cycle)
    and 16 threads when both were measured, else 1 / median cycle (results of older runs)."""
    if not fig:
        return None, ""
    if fig.get("best_cycles_per_s"):
        return fig["best_cycles_per_s"], fig.get("best_of", "")
    lat = _get(fig, "latency_ms", "median")
    return (round(1e3 / lat, 1), "1 thread, 1 / median cycle") if lat else (None, "")


def _threads_note(fig: dict[str, Any] | None) -> str:
    rate = _get(fig or {}, "threads_16", "cycles_per_s", "median")
    return f"; 16 threads {rate}/s, 1 thread {(fig or {}).get('cycles_per_s')}/s" if rate is not None else ""


def _cycle_goals(s: dict[str, Any], add: Any) -> None:
    """S1 and S2 against LangGraph+SQLite in both durability modes (the goal reads the bench
    aio driver over TCP; the shipped asyncio client is shown beside it)."""
    s1 = _get(s, "s1", "tcp", "latency_ms", "median")
    s1u = _get(s, "s1", "unix", "latency_ms", "median")
    shipped = _get(s, "s1", "aio_client_tcp", "latency_ms", "median")
    for mode in ("async", "sync"):
        lg = _get(s, "s3", SQLITE_KEYS[mode], "latency_ms", "median")
        r = ratio(s1, lg)
        detail = (f"daemon tcp {s1} ms / unix {s1u} ms (bench driver, s1) "
                  f"vs LangGraph+SqliteSaver {lg} ms (s3)")
        beside = _get(s, "s3", "beside_daemon")
        paired = _get(beside or {}, f"daemon_over_langgraph_{mode}")
        if paired:  # the same driver and LangGraph interleaved cycle by cycle: the ratio shares its moments
            detail += (f" (ratio of medians {r}); interleaved cycle by cycle in s3, {beside.get('reps')} "
                       f"repetitions: daemon {_get(beside, 'daemon_tcp', 'median')} ms vs "
                       f"{_get(beside, f'langgraph_{mode}', 'median')} ms, per-repetition ratios "
                       f"{paired['min']}–{paired['max']}")
            r = round(paired["median"], 2)
        add(f"S1 cycle ≤ 1.0× LangGraph+SQLite ({MODE_LABEL[mode]})", r, "≤ 1.0",
            None if r is None else r <= 1.0, detail)
        _fused_s1_goal(s, mode, lg, add)
        r = ratio(shipped, lg)
        add(f"S1 shipped asyncio client cycle vs LangGraph+SQLite ({MODE_LABEL[mode]})", r, "≤ 1.0",
            None if r is None else r <= 1.0, f"toolnexus_client.aio over TCP {shipped} ms vs {lg} ms",
            shown=True)
    s2 = _get(s, "s2", "cycles_per_s", "median")
    s2_shipped = _get(s, "s2", "aio_client", "cycles_per_s", "median")
    for mode in ("async", "sync"):
        fig = _get(s, "s3", SQLITE_KEYS[mode])
        peer, how = peer_rate(fig)
        r = ratio(s2, peer)
        add(f"S2 16 clients ≥ 3× LangGraph+SQLite cycles/s ({MODE_LABEL[mode]})", r, "≥ 3.0",
            None if r is None else r >= 3.0,
            f"daemon 16 asyncio tasks {s2} cycles/s (bench driver) vs LangGraph+SqliteSaver {peer}/s "
            f"(the better of 1 and 16 threads: {how}{_threads_note(fig)})")
        r = ratio(s2_shipped, peer)
        add(f"S2 shipped asyncio client, 16 tasks, vs LangGraph+SQLite ({MODE_LABEL[mode]})", r, "≥ 3.0",
            None if r is None else r >= 3.0, f"toolnexus_client.aio {s2_shipped} cycles/s vs {peer}/s",
            shown=True)
        fused = _get(s, "s2", "fused", "cycles_per_s", "median")
        r = ratio(fused, peer)
        add(f"S2 fused cycle, 16 clients, ≥ 3× LangGraph+SQLite cycles/s ({MODE_LABEL[mode]})", r, "≥ 3.0",
            None if r is None else r >= 3.0,
            f"daemon 16 asyncio tasks, Spawn with prompt and wait + Resume, {fused} cycles/s vs {peer}/s")


def _fused_s1_goal(s: dict[str, Any], mode: str, lg: float | None, add: Any) -> None:
    """S1 for the fused cycle (Spawn with prompt and wait → pending, Resume → done, 2 RPCs
    and 6 synced commits): the same spawn→wake→pending→resume→done a client of either shipped client
    can run; the paired ratio from s3 when it was measured, else the ratio of medians."""
    fused = _get(s, "s1", "fused_tcp", "latency_ms", "median")
    r = ratio(fused, lg)
    detail = f"fused cycle over tcp {fused} ms (bench driver, s1) vs LangGraph+SqliteSaver {lg} ms (s3)"
    paired = _get(s, "s3", "beside_daemon", f"fused_over_langgraph_{mode}")
    if paired:
        detail += (f" (ratio of medians {r}); interleaved cycle by cycle in s3: per-repetition ratios "
                   f"{paired['min']}–{paired['max']}")
        r = round(paired["median"], 2)
    add(f"S1 fused cycle ≤ 1.0× LangGraph+SQLite ({MODE_LABEL[mode]})", r, "≤ 1.0",
        None if r is None else r <= 1.0, detail)


def pg_parts(s: dict[str, Any]) -> tuple[float | None, dict[str, Any]]:
    """S4-PG's floor (ms): the PostgreSQL cycle's unary RPCs at echo-unary cost + its worker round trips
    at echo-stream cost (s4's echo over TCP, the transport pg's daemons listen on) + its write
    transactions at the cost of one durable commit of the store's shape (sampled in pg); the counts
    are pg's measured anatomy. None when a part was not measured."""
    an = _get(s, "pg", "daemon", "anatomy", "pg") or {}
    unary = _get(s, "s4", "echo", "tcp", "unary_ms", "median")
    stream = _get(s, "s4", "echo", "tcp", "stream_roundtrip_ms", "median")
    commit = _get(s, "pg", "daemon", "cycle", "pg_commit_ms", "median")
    parts = {"rpcs": an.get("unary_rpcs_per_cycle"), "roundtrips": an.get("worker_roundtrips_per_cycle"),
             "txns": an.get("write_txns_per_cycle"), "echo_unary_ms": unary, "echo_stream_ms": stream,
             "commit_ms": commit}
    if any(v is None for v in parts.values()):
        return None, parts

    def floor(commit_ms: float) -> float:
        return float(parts["rpcs"] * unary + parts["roundtrips"] * stream + parts["txns"] * commit_ms)

    cycle = _get(s, "pg", "daemon", "cycle") or {}
    reps, commits = cycle.get("pg_reps_ms") or [], cycle.get("pg_commit_reps_ms") or []
    if reps and len(reps) == len(commits):  # each repetition's cycle against its own commit sample
        per_rep = sorted(c / floor(f) for c, f in zip(reps, commits, strict=True))
        parts["paired"] = {"median": round(statistics.median(per_rep), 2), "min": round(per_rep[0], 2),
                           "max": round(per_rep[-1], 2), "n": len(per_rep)}
    return round(floor(commit), 3), parts


def _pg_cycle_goals(s: dict[str, Any], add: Any) -> None:
    """S1, S2 and S4 on PostgreSQL against LangGraph+PostgresSaver in both durability modes."""
    pg = _get(s, "pg") or {}
    pg_ms = _get(pg, "daemon", "cycle", "pg", "latency_ms", "median")
    for mode in ("async", "sync"):
        lg = _get(pg, "langgraph_pg", mode, "latency_ms", "median")
        r = ratio(pg_ms, lg)
        paired = _get(pg, "daemon", "cycle", "pg_over", f"langgraph_{mode}")
        detail = f"daemon on PostgreSQL {pg_ms} ms vs LangGraph+PostgresSaver {lg} ms"
        if paired:  # LangGraph took turns with the daemons: the per-repetition ratios share their weather
            detail += (f" (ratio of medians {r}); median of {paired['n']} interleaved per-repetition "
                       f"ratios, range {paired['min']}–{paired['max']}")
            r = round(paired["median"], 2)
        add(f"S1-PG cycle ≤ 1.0× LangGraph+PostgreSQL ({MODE_LABEL[mode]})", r, "≤ 1.0",
            None if r is None else r <= 1.0, detail)
    c16 = _get(pg, "cycles_per_s_16", "pg", "median")
    for mode in ("async", "sync"):
        fig = _get(pg, "langgraph_pg", mode)
        peer, how = peer_rate(fig)
        r = ratio(c16, peer)
        paired = _get(pg, "daemon", "transitions_16", "pg_over", f"langgraph_{mode}_threads")
        add(f"S2-PG 16 clients ≥ 3× LangGraph+PostgreSQL cycles/s ({MODE_LABEL[mode]})", r, "≥ 3.0",
            None if r is None else r >= 3.0,
            f"daemon on PostgreSQL, 16 asyncio tasks {c16} cycles/s vs LangGraph+PostgresSaver {peer}/s (the "
            f"better of 1 and 16 threads: {how}{_threads_note(fig)})"
            + (f"; against 16 threads taking turns with the daemons, per repetition {paired['median']} "
               f"({paired['min']}–{paired['max']})" if paired else ""))
    total, parts = pg_parts(s)
    r = ratio(pg_ms, total)
    detail = (f"parts {total} ms = {parts['rpcs']} RPCs × {parts['echo_unary_ms']} ms + "
              f"{parts['roundtrips']} worker round trips × {parts['echo_stream_ms']} ms (echo, s4) + "
              f"{parts['txns']} write transactions × "
              f"{parts['commit_ms']} ms (one durable commit of the store's shape); cycle {pg_ms} ms")
    paired = parts.get("paired")
    if paired and r is not None:  # the commit is sampled after every repetition: read it per repetition
        detail += (f" (ratio of medians {r}); median of {paired['n']} per-repetition ratios "
                   f"(each repetition's commit sample), range {paired['min']}–{paired['max']}")
        r = paired["median"]
    add("S4-PG cycle ≤ 1.5× sum of its parts (tcp)", r, "≤ 1.5", None if r is None else r <= 1.5, detail)


TRANSPORT_PAIRS = (
    ("tcp_over_unix", "bench driver over TCP ≤ 1.2× over a unix socket"),
    ("tcp_over_python_client_tcp", "bench driver over TCP ≤ 1.2× the blocking client over TCP"),
    ("aio_client_tcp_over_unix", "shipped asyncio client over TCP ≤ 1.2× over a unix socket"),
)


def _transport_goals(s: dict[str, Any], add: Any) -> None:
    """No transport-specific stall — the asyncio cycles over TCP beside the unix-socket ones and
    the blocking client's, as ratios within each interleaved repetition (bench/interleave.py)."""
    il = _get(s, "s1", "interleaved") or {}
    probe = il.get("commit_probe_ms") or {}
    for key, label in TRANSPORT_PAIRS:
        rng = il.get(key) or {}
        r = rng.get("median")
        add(f"T1 {label} (paired)", r, "≤ 1.2", None if r is None else r <= 1.2,
            f"per-repetition ratios {rng.get('min')}–{rng.get('max')} over {il.get('reps')} interleaved "
            f"repetitions; synced-commit probe {probe.get('min')}–{probe.get('max')} ms")


def _pg_goals(s: dict[str, Any], add: Any) -> None:
    """The PostgreSQL cycle within 1.5× the LMDB cycle, and faster than LangGraph+PostgreSQL."""
    pg = _get(s, "pg") or {}
    pg_ms = _get(pg, "daemon", "cycle", "pg", "latency_ms", "median")
    lm_ms = _get(pg, "daemon", "cycle", "lmdb", "latency_ms", "median")
    r = pg.get("pg_over_lmdb_cycle")
    add("P1 daemon PostgreSQL cycle ≤ 1.5× its LMDB cycle", r, "≤ 1.5", None if r is None else r <= 1.5,
        f"PostgreSQL {pg_ms} ms vs LMDB {lm_ms} ms (same run, interleaved cycle by cycle with LangGraph); "
        f"write transactions per cycle {_get(pg, 'daemon', 'write_txns_per_cycle')}")
    for mode in ("async", "sync"):
        r = _get(pg, "pg_over_langgraph_pg", mode)
        add(f"P2 daemon PostgreSQL cycle < LangGraph+PostgresSaver (durability={mode})", r, "< 1.0",
            None if r is None else r < 1.0,
            f"daemon {pg_ms} ms vs LangGraph {_get(pg, 'langgraph_pg', mode, 'latency_ms', 'median')} ms "
            f"({_get(pg, 'langgraph_pg', mode, 'write_txns_per_cycle')} write transactions per cycle)")


def _pg_scale_goal(s: dict[str, Any], add: Any) -> None:
    """A daemon with the largest level parked in PostgreSQL serves again well under a second."""
    sm = _get(s, "pgs", "summary") or {}
    t = sm.get("restart_to_serving_s")
    add(f"P3 restart to SERVING with {sm.get('parked')} parked in PostgreSQL < 1 s", t, "< 1 s",
        None if t is None else t < 1.0, f"RSS after the restart {sm.get('rss_after_restart_mib')} MiB")


def _cluster_goals(s: dict[str, Any], add: Any) -> None:
    """A killed owner's runtime is served again within two leases; forwarding is reported."""
    tk = _get(s, "cl", "takeover") or {}
    r = tk.get("over_lease")
    add("C1 takeover after kill -9 ≤ 2 leases", r, "≤ 2.0", None if r is None else r <= 2.0,
        f"median {_get(tk, 'seconds', 'median')} s with --lease-ms {tk.get('lease_ms')} over "
        f"{tk.get('rounds')} rounds")
    fw = _get(s, "cl", "forwarding") or {}
    r = fw.get("forwarded_over_direct")
    add("C2 a cycle through a non-owner ≤ 1.5× through the owner", r, "≤ 1.5",
        None if r is None else r <= 1.5,
        f"{fw.get('overhead_per_call_ms')} ms per forwarded call; direct "
        f"{_get(fw, 'direct', 'latency_ms', 'median')} ms, "
        f"forwarded {_get(fw, 'forwarded', 'latency_ms', 'median')} ms")


def _fmt(summary: dict[str, Any] | None) -> tuple[str, str]:
    if not summary:
        return "–", "–"
    return f"{summary['median']:g}", f"{summary['min']:g}–{summary['max']:g}"


def render(results: dict[str, Any], path: Path) -> str:
    s = {k: v for k, v in results["scenarios"].items() if "error" not in v}
    failed = {k: v["error"] for k, v in results["scenarios"].items() if "error" in v}
    m = results["machine"]
    rows: list[tuple[str, str, dict[str, Any] | None, str]] = []

    def row(scenario: str, what: str, summary: dict[str, Any] | None, unit: str) -> None:
        rows.append((scenario, what, summary, unit))

    row("1 cycle, sequential", "daemon, synced, TCP (grpc.aio client)", _get(s, "s1", "tcp", "latency_ms"),
        "ms")
    row("1 cycle, sequential", "daemon, synced, unix socket", _get(s, "s1", "unix", "latency_ms"), "ms")
    row("1 cycle, sequential", "daemon, synced, TCP, shipped sync Python client",
        _get(s, "s1", "python_client_tcp", "latency_ms"), "ms")
    for t in ("tcp", "unix"):
        row("1 cycle, sequential", f"daemon, synced, {t}, shipped asyncio client (toolnexus_client.aio)",
            _get(s, "s1", f"aio_client_{t}", "latency_ms"), "ms")
    row("2 cycle, 16 clients", "daemon, synced, TCP, 16 asyncio tasks", _get(s, "s2", "cycles_per_s"),
        "cycles/s")
    row("2 cycle, 16 clients",
        "daemon, synced, TCP, 16 tasks on the shipped asyncio client (toolnexus_client.aio)",
        _get(s, "s2", "aio_client", "cycles_per_s"), "cycles/s")
    row("3 in-process peer", "reference toolnexus AgentRuntime (memory)",
        _get(s, "s3", "reference_toolnexus", "latency_ms"), "ms")
    for mode in ("async", "sync"):
        default = " (LangGraph's default)" if mode == "async" else ""
        row("3 in-process peer", f"LangGraph + SqliteSaver (file, WAL), durability={mode}{default}",
            _get(s, "s3", SQLITE_KEYS[mode], "latency_ms"), "ms")
        row("3 in-process peer", f"LangGraph + SqliteSaver, durability={mode}, 16 threads (a saver each)",
            _get(s, "s3", SQLITE_KEYS[mode], "threads_16", "cycles_per_s"), "cycles/s")
    row("3 in-process peer", "LangGraph + InMemorySaver", _get(s, "s3", "langgraph_memory", "latency_ms"),
        "ms")
    for t in ("tcp", "unix"):
        row("4 floor", f"grpc.aio echo, unary ({t})", _get(s, "s4", "echo", t, "unary_ms"), "ms")
        row("4 floor", f"grpc.aio echo, stream round trip ({t})",
            _get(s, "s4", "echo", t, "stream_roundtrip_ms"), "ms")
        row("4 floor", f"daemon Snapshot ({t})", _get(s, "s4", f"snapshot_{t}_ms"), "ms")
    row("4 floor", "one synced LMDB commit (3 puts)", _get(s, "s4", "lmdb", "synced_commit_ms"), "ms")
    for level, res in (_get(s, "s5", "daemon") or {}).items():
        row("5 scale", f"daemon cycle, {int(level):,} parked (synced, after restart)", res.get("latency_ms"),
            "ms")
    for level, res in (_get(s, "s5", "reference") or {}).items():
        row("5 scale", f"reference cycle, {int(level):,} parked (memory)", res.get("latency_ms"), "ms")
    row("6 slow model", f"{_get(s, 's6', 'handles')} handles, 50 ms model, gate "
        f"{_get(s, 's6', 'max_concurrent_turns')}", _get(s, "s6", "turns_per_s"), "turns/s")
    row("6 slow model", "the same on a --no-sync daemon (diagnostic)",
        _get(s, "s6", "no_sync", "turns_per_s"), "turns/s")
    tr = _get(s, "tr") or {}
    for mode in ("synced", "no_sync"):
        for c in (1, 8, 64):
            row("I4 transitions", f"{mode.replace('_', '-')}, {c} client(s)", tr.get(f"{mode}_{c}"),
                "transitions/s")
    _pg_rows(s, row)

    lines = [f"Run `{path.name}` ({results['profile']['name']} profile, {results.get('elapsed_s')} s): "
             f"{m['cores']} cores ({m['cpu']}), {m['memory_gib']} GiB, Python {m['python']}, "
             f"load average at start {m['loadavg_at_start']}, daemon tree `{m['git']}`.",
             "Versions: " + ", ".join(f"{k} {v}" for k, v in m["versions"].items()) + ".",
             "",
             f"Medians over {results['profile']['reps']} repetitions "
             "(each the median of its cycles, or a rate), after warm-up; min–max across repetitions.",
             "",
             "| scenario | what | median | min–max | unit |", "|---|---|---:|---:|---|"]
    for scenario, what, summary, unit in rows:
        if summary is None:
            continue
        med, rng = _fmt(summary)
        lines.append(f"| {scenario} | {what} | {med} | {rng} | {unit} |")
    extra = _extras(s) + [f"- Scenario {k} FAILED in this run: `{v[:300]}`" for k, v in failed.items()]
    if extra:
        lines += ["", *extra]
    lines += ["", "| goal | measured | bar | verdict | detail |", "|---|---:|---|---|---|"]
    for g in results.get("goals") or []:
        lines.append(f"| {g['goal']} | {g['value'] if g['value'] is not None else '–'} | {g['bar']} | "
                     f"**{g['status']}** | {g['detail']} |")
    return "\n".join(lines) + "\n"


def _pg_rows(s: dict[str, Any], row: Any) -> None:
    pg = _get(s, "pg") or {}
    for store, what in (("lmdb", "daemon, synced LMDB"),
                        ("pg", "daemon, PostgreSQL (synchronous_commit on)")):
        row("P cycle, sequential", f"{what}, TCP", _get(pg, "daemon", "cycle", store, "latency_ms"), "ms")
    for mode in ("async", "sync"):
        default = " (LangGraph's default)" if mode == "async" else ""
        row("P in-process peer", f"LangGraph + PostgresSaver, durability={mode}{default}",
            _get(pg, "langgraph_pg", mode, "latency_ms"), "ms")
        row("P in-process peer", f"LangGraph + PostgresSaver, durability={mode}, 16 threads (a saver each)",
            _get(pg, "langgraph_pg", mode, "threads_16", "cycles_per_s"), "cycles/s")
    row("P cycle, 16 clients", "daemon, PostgreSQL, 16 asyncio tasks (transitions/s ÷ transitions per cycle)",
        _get(pg, "cycles_per_s_16", "pg"), "cycles/s")
    row("P floor", "one durable PostgreSQL commit of the store's shape (pg_write, sampled per repetition)",
        _get(pg, "daemon", "cycle", "pg_commit_ms"), "ms")
    for c in (1, 8, 16, 64):
        for store, what in (("lmdb", "synced LMDB"), ("pg", "PostgreSQL")):
            row("P transitions", f"{what}, {c} client(s)", _get(pg, "daemon", f"transitions_{c}", store),
                "transitions/s")
    pgd = _get(s, "pgd") or {}
    for mode in ("on", "off"):
        for v in ("psycopg_sync", "psycopg_one_sync", "psycopg_thread", "psycopg_async", "asyncpg",
                  "asyncpg_one_statement", "psycopg_one_statement"):
            row("P driver commit", f"{v}, synchronous_commit={mode}",
                _get(pgd, f"synchronous_commit_{mode}", v, "commit_ms"), "ms")


def _ratio(r: dict[str, Any]) -> str:
    return f"{r['median']} ({r['min']}–{r['max']})"


def _extras(s: dict[str, Any]) -> list[str]:
    out = []
    an = _get(s, "s4", "anatomy")
    if an:
        out.append(f"- Cycle anatomy (measured): {an['unary_rpcs_per_cycle']} unary RPCs, "
                   f"{an['worker_roundtrips_per_cycle']} worker round trips, "
                   f"{an['write_txns_per_cycle']} LMDB write "
                   f"transactions (by verb: {an.get('write_txns_by_phase', 'n/a')}), "
                   f"{an['transitions_per_cycle']} transitions. Per-phase medians over TCP (ms): "
                   + ", ".join(f"{k} {v}"
                               for k, v in (_get(s, "s1", "tcp", "phases_ms") or {}).items()) + ".")
    il = _get(s, "s1", "interleaved")
    if il:
        out.append(f"- Transports (s1, one daemon, {il['reps']} repetitions of {il['cycles_per_rep']} "
                   "rounds, a round one cycle of each client in rotated order): aio TCP / aio unix "
                   f"{_ratio(il['tcp_over_unix'])}, aio TCP / blocking TCP "
                   f"{_ratio(il['tcp_over_python_client_tcp'])}, shipped asyncio client "
                   f"TCP / unix {_ratio(il['aio_client_tcp_over_unix'])}; synced-commit probe "
                   f"{_ratio(il['commit_probe_ms'])} ms.")
    bd = _get(s, "s3", "beside_daemon")
    if bd:
        out.append("- Peers beside the daemon (s3, the bench driver over TCP and LangGraph+SqliteSaver "
                   f"interleaved cycle by cycle, {bd['reps']} repetitions of {bd['cycles_per_rep']} rounds): "
                   f"daemon {bd['daemon_tcp']['median']} ms, "
                   f"LangGraph async {bd['langgraph_async']['median']} ms, sync "
                   f"{bd['langgraph_sync']['median']} ms; daemon / LangGraph per repetition: async "
                   f"{_ratio(bd['daemon_over_langgraph_async'])}, "
                   f"sync {_ratio(bd['daemon_over_langgraph_sync'])}.")
    il5 = _get(s, "s5", "interleaved")
    if il5:
        out.append("- Scale (s5, every level on its own restarted daemon, cycles interleaved round by "
                   f"round, {il5['reps']} repetitions of {il5['cycles_per_rep']}): cycle high/low level "
                   f"{_ratio(il5['cycle_hi_over_lo'])}, Resume {_ratio(il5['resume_hi_over_lo'])}; "
                   f"synced-commit probe {_ratio(il5['commit_probe_ms'])} ms.")
    d = _get(s, "s5", "daemon") or {}
    for level, res in d.items():
        out.append(f"- Scale, {int(level):,} parked: restart to SERVING {res['restart_to_serving_s']} s; "
                   f"RSS after restart {res['rss_after_restart_mib']} MiB, "
                   f"after the cycles {res['rss_after_cycles_mib']} MiB, "
                   f"of the daemon that parked them {res['creator_rss_mib']} MiB; Resume (resume→done) "
                   f"{res['phases_ms']['resume_done']} ms; store {res['store_size_bytes']:,} B; parked at "
                   f"{res['creation_per_s']}/s with 64 clients on a --no-sync daemon.")
    sm = _get(s, "s5", "summary")
    if sm:
        out.append(f"- LMDB bytes per parked handle: {sm['lmdb_bytes_per_parked']}; "
                   "RSS growth per parked handle: "
                   f"{sm['rss_growth_bytes_per_parked_after_restart']} B (restarted daemon), "
                   f"{sm['rss_growth_bytes_per_parked_creator']} B (the daemon that parked them).")
    s6 = _get(s, "s6")
    if s6:
        out.append(f"- Slow model: {s6['turns_per_round']} turns per round, fraction of ideal "
                   f"{s6['fraction_of_ideal']}, daemon peak RSS {s6['daemon_peak_rss_mib']} MiB.")
    pg = _get(s, "pg")
    if pg:
        out.append(f"- PostgreSQL (one embedded server, {pg['server']}): write transactions per cycle "
                   f"{pg['daemon']['write_txns_per_cycle']}; per-phase medians (ms) LMDB "
                   f"{pg['daemon']['cycle']['lmdb']['phases_ms']}, "
                   f"PostgreSQL {pg['daemon']['cycle']['pg']['phases_ms']};"
                   f" PostgreSQL/LMDB transitions/s by clients {pg['pg_over_lmdb_transitions']}; LangGraph "
                   "write transactions per cycle: "
                   f"async {pg['langgraph_pg']['async']['write_txns_per_cycle']}, "
                   f"sync {pg['langgraph_pg']['sync']['write_txns_per_cycle']}.")
        an = _get(pg, "daemon", "anatomy", "pg")
        if an:
            out.append(f"- PostgreSQL cycle anatomy (measured): {an['unary_rpcs_per_cycle']} unary RPCs "
                       f"({an.get('rpcs')}), {an['worker_roundtrips_per_cycle']} worker round trips, "
                       f"{an['write_txns_per_cycle']} write transactions (the server's xid advance).")
    pgd = _get(s, "pgd")
    if pgd:
        for mode in ("on", "off"):
            m = pgd[f"synchronous_commit_{mode}"]
            out.append(f"- Driver, synchronous_commit={mode}: asyncpg / psycopg-through-a-thread "
                       f"(the daemon's shape) = {m['asyncpg_over_psycopg_thread']}; "
                       "asyncpg one statement / psycopg-through-a-thread = "
                       f"{m['asyncpg_one_statement_over_psycopg_thread']}; "
                       "psycopg one statement / psycopg pipeline = "
                       f"{m['psycopg_one_statement']['over_psycopg_sync']}.")
    tr = _get(s, "tr")
    if tr:
        out.append(f"- Transitions: synced/no-sync at 64 clients = {tr['synced_over_no_sync_64']}; "
                   f"synced 64 vs 1 client = {tr['synced_64_over_synced_1']}×.")
    return out


def write_readme(table: str, quick: bool) -> None:
    """Replace the text between this profile's markers in bench/README.md."""
    tag = "quick" if quick else "full"
    start, end = f"<!-- results:{tag}:start -->", f"<!-- results:{tag}:end -->"
    text = README.read_text() if README.exists() else ""
    block = f"{start}\n{table}{end}"
    if start in text and end in text:
        text = re.sub(re.escape(start) + r".*?" + re.escape(end), lambda _: block, text, flags=re.S)
    else:
        text += f"\n{block}\n"
    README.write_text(text)
