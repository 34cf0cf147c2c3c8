"""The benchmark's interleaving (bench/interleave.py): the figures it compares are taken
in the same moments, and the transport goal reads the paired ratios. No timing is asserted: the
variants here are scripted, their 'latencies' are numbers the test chooses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench import interleave, report


def _scripted(name: str, calls: list[str], weather: list[float], factor: float,
              per_round: int = 1) -> interleave.Variant:
    """A variant whose cycle 'takes' factor × the weather of the moment (which worsens after every
    ``per_round`` cycles, of whichever variant); records who ran when."""
    def cycles(n: int, phases: dict[str, list[float]]) -> list[float]:
        out = []
        for _ in range(n):
            calls.append(name)
            phases.setdefault("resume_done", []).append(factor * weather[0] / 2)
            out.append(factor * weather[0])
            if len(calls) % per_round == 0:
                weather[0] += 1.0  # the machine gets slower and slower: only a paired ratio stays put
        return out
    return cycles


def test_every_round_runs_each_variant_once_and_nobody_is_always_first() -> None:
    calls: list[str] = []
    weather = [1.0]
    names = ("a", "b", "c")
    variants = {n: _scripted(n, calls, weather, 1.0) for n in names}
    interleave.run(variants, warmup=2, reps=2, cycles=6, label="test")
    measured = calls[6:]  # after 2 warm-up cycles of each
    rounds = [measured[i:i + 3] for i in range(0, len(measured), 3)]
    assert len(rounds) == 12 and all(sorted(r) == list(names) for r in rounds)
    firsts = [r[0] for r in rounds]
    assert {n: firsts.count(n) for n in names} == {"a": 4, "b": 4, "c": 4}


def test_paired_ratio_holds_while_the_weather_drifts() -> None:
    calls: list[str] = []
    weather = [1.0]
    res = interleave.run({"slow": _scripted("slow", calls, weather, 2.0, per_round=2),
                          "fast": _scripted("fast", calls, weather, 1.0, per_round=2)},
                         warmup=1, reps=3, cycles=5)
    ratio = interleave.paired_ratio(res, "slow", "fast")
    # both variants of a round see its weather, so each repetition's ratio is the true 2 although
    # the absolute figures grew several-fold over the run
    assert ratio["min"] == ratio["median"] == ratio["max"] == 2.0
    assert res["reps_s"]["fast"][-1] > 3 * res["reps_s"]["fast"][0]
    fig = interleave.figure(res, "slow")
    assert fig["latency_ms"]["n"] == 3 and set(fig["phases_ms"]) == {"resume_done"}


def test_commit_probe_measures_synced_commits(tmp_path: Path) -> None:
    probe = interleave.CommitProbe(tmp_path / "not-yet" / "probe", commits=3)  # pgs nests its dirs
    try:
        assert probe.sample() > 0
    finally:
        probe.close()


def _results(tcp_over_unix: float, tcp_over_blocking: float, shipped: float = 1.0) -> dict[str, Any]:
    def r(x: float) -> dict[str, float]:
        return {"median": x, "min": x, "max": x, "n": 7}
    paired = {"reps": 7, "cycles_per_rep": 20, "tcp_over_unix": r(tcp_over_unix),
              "tcp_over_python_client_tcp": r(tcp_over_blocking), "aio_client_tcp_over_unix": r(shipped),
              "commit_probe_ms": r(0.4)}
    return {"scenarios": {"s1": {"interleaved": paired}}}


def _verdicts(results: dict[str, Any]) -> dict[str, str]:
    return {g["goal"]: g["status"] for g in report.goals(results) if g["goal"].startswith("T1")}


def test_transport_goal_flags_an_aio_tcp_stall() -> None:
    # the shape once reported: 30.2 ms over TCP, 11.0 over unix, 12.0 with the blocking client
    stalled = _verdicts(_results(30.2 / 11.0, 30.2 / 12.0, 30.2 / 11.0))
    assert set(stalled.values()) == {"MISSED"} and len(stalled) == 3
    assert set(_verdicts(_results(1.01, 0.98)).values()) == {"met"}
    only_shipped = _verdicts(_results(1.0, 1.0, 1.6))
    assert sorted(only_shipped.values()) == ["MISSED", "met", "met"]
    assert set(_verdicts({"scenarios": {}}).values()) == {"not run"}
