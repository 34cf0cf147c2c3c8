"""Interleaved repetitions: compare figures that were measured in the same moments.

The machine is shared: another session's fsyncs can make every synced commit
take 3–8 ms instead of 0.3 for a second or two, which adds ~20 ms to a cycle
of seven synced commits. A scenario that measures all of one variant, then all
of the next, lets such a window fall on one variant and reads as a difference
between them ("30.2 ms over TCP, 11.0 over a unix socket" was one
such window; interleaved, their ratio read 0.95–1.11 in five loaded runs). Here every
repetition is a run of rounds, a round is one cycle of every variant in an
order rotated round by round (none is always first), so the medians of one
repetition cover the same seconds; a synced-commit probe records the disk's
weather after each repetition, and ratios are taken per repetition (its
variants share its weather) before the median.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import lmdb

from . import peers
from .common import log, summary
from .driver import Daemon

# one variant's ``n`` cycles: per-phase seconds appended to ``phases``; returns seconds per cycle
Variant = Callable[[int, dict[str, list[float]]], list[float]]


class CommitProbe:
    """Synced LMDB write transactions on the disk the daemons use: the fsync weather at a moment."""

    def __init__(self, path: Path, commits: int = 10) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.env = lmdb.open(str(path), map_size=1 << 28, sync=True)
        self.commits = commits
        self.value = os.urandom(500)

    def sample(self) -> float:
        """Median ms of one small burst of synced commits."""
        lat = []
        for _ in range(self.commits):
            t0 = time.perf_counter()
            with self.env.begin(write=True) as txn:
                txn.put(os.urandom(8), self.value)
            lat.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(lat)

    def close(self) -> None:
        self.env.close()


def run(variants: dict[str, Variant], *, warmup: int, reps: int, cycles: int,
        probe: CommitProbe | None = None, label: str = "") -> dict[str, Any]:
    """Warm each variant, then ``reps`` repetitions of ``cycles`` rounds; a round is one cycle of
    every variant, in an order rotated round by round, so each repetition's median of every variant
    covers the same second or two.

    Returns per variant the repetition medians (seconds) and per-phase repetition medians, and the
    probe's sample after each repetition (ms).
    """
    names = list(variants)
    for name in names:
        variants[name](warmup, {})
    reps_s: dict[str, list[float]] = {n: [] for n in names}
    every: dict[str, list[float]] = {n: [] for n in names}
    phases: dict[str, dict[str, list[float]]] = {n: {} for n in names}
    weather: list[float] = []
    turn = 0
    for rep in range(reps):
        lat: dict[str, list[float]] = {n: [] for n in names}
        rep_phases: dict[str, dict[str, list[float]]] = {n: {} for n in names}
        for _ in range(cycles):
            k = turn % len(names)
            turn += 1
            for name in names[k:] + names[:k]:
                lat[name].extend(variants[name](1, rep_phases[name]))
        for name in names:
            reps_s[name].append(statistics.median(lat[name]))
            every[name].extend(lat[name])
            for phase, values in rep_phases[name].items():
                phases[name].setdefault(phase, []).append(statistics.median(values))
        if probe is not None:
            weather.append(round(probe.sample(), 3))
        log(f"{label} rep {rep}: " + ", ".join(f"{n} {reps_s[n][-1] * 1e3:.2f}" for n in names)
            + (f", synced commit {weather[-1]} ms" if weather else ""))
    return {"reps_s": reps_s, "phases_s": phases, "commit_probe_ms": weather, "every_s": every}


def figure(res: dict[str, Any], name: str) -> dict[str, Any]:
    """A variant's latency summary (ms) and per-phase medians (ms), the scenarios' usual shape."""
    every = sorted(res["every_s"][name])
    # over all the run's cycles too: when about half the cycles of a repetition fall in a slow-disk
    # window its median jumps between the two modes; the run's median and p90 move less
    out: dict[str, Any] = {"latency_ms": summary(res["reps_s"][name], 1e3),
                           "all_cycles_ms": {"median": round(statistics.median(every) * 1e3, 3),
                                             "p90": round(every[int(len(every) * 0.9)] * 1e3, 3),
                                             "n": len(every)}}
    phases = res["phases_s"][name]
    if phases:
        out["phases_ms"] = {k: summary(v, 1e3)["median"] for k, v in phases.items()}
    return out


def paired_ratio(res: dict[str, Any], num: str, den: str) -> dict[str, Any]:
    """``num / den`` per repetition (same weather), then median, min, max; ``all_cycles`` is the ratio
    of the two medians over every cycle of the run."""
    out = summary([a / b for a, b in zip(res["reps_s"][num], res["reps_s"][den], strict=True)], 1.0, 3)
    a, b = statistics.median(res["every_s"][num]), statistics.median(res["every_s"][den])
    out["all_cycles"] = round(a / b, 3)
    return out


def aio_variant(loop: asyncio.AbstractEventLoop, d: Daemon, *, fused: bool = False) -> Variant:
    """A variant running the bench driver's cycles (bench/driver.py, the shipped asyncio
    client with async callables) on ``loop`` (run from this thread); ``fused``:
    its 2-RPC cycle (Spawn with prompt and wait, Resume) instead of the classic 4-RPC one."""
    cycle = d.fused_cycle if fused else d.cycle

    async def cycles(n: int, phases: dict[str, list[float]]) -> list[float]:
        out = []
        for _ in range(n):
            t0 = time.perf_counter()
            await cycle(phases)
            out.append(time.perf_counter() - t0)
        return out

    def run_cycles(n: int, phases: dict[str, list[float]]) -> list[float]:
        return loop.run_until_complete(cycles(n, phases))

    return run_cycles


def on_loop(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any]) -> Any:
    return loop.run_until_complete(coro)


def _cycle_parts() -> tuple[Any, Callable[[dict[str, Any]], dict[str, Any]]]:
    """The registry (secret_action suspends once, then 'action performed') and the mock model transport,
    as an app on the shipped clients would write them."""
    from toolnexus_client import Tool, ToolResult, agent
    from toolnexus_client import registry as client_registry

    def secret_action(args: dict[str, Any], ctx: Any) -> Any:
        if ctx.answer is None:
            return ToolResult.suspend(id=f"approve:{ctx.handle}", kind="approval", prompt="approve?")
        return "action performed"

    def transport(request: dict[str, Any]) -> dict[str, Any]:
        body = request["body"]
        return {"status": 200, "body": {"choices": [{"index": 0, "message": peers.mock_model(
            body.get("messages") or [], bool(body.get("tools")))}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}}

    reg = client_registry(agent("operator", does="acts", uses={"tools": [Tool("secret_action",
                                                                               execute=secret_action)]}))
    return reg, transport


@contextmanager
def blocking_variant(target: str) -> Iterator[Variant]:
    """The same cycle through the shipped blocking client (toolnexus_client), as an app would write it."""
    from toolnexus_client import Runtime

    reg, transport = _cycle_parts()
    with Runtime.new(target=target, registry=reg, transport=transport) as rt:
        def cycles(n: int, phases: dict[str, list[float]]) -> list[float]:
            out = []
            for _ in range(n):
                t0 = time.perf_counter()
                h = rt.spawn(rt.root, "operator")
                rt.wake(h, peers.PROMPT)
                r = rt.wait(h, timeout=60)
                assert r.status == "pending" and r.pending is not None, r
                done = rt.resume({"id": r.pending.id, "ok": True})
                assert done.result is not None and done.result.text == "action performed", done
                out.append(time.perf_counter() - t0)
            return out

        yield cycles


@contextmanager
def shipped_aio_variant(loop: asyncio.AbstractEventLoop, target: str) -> Iterator[Variant]:
    """The same cycle through the shipped asyncio client (toolnexus_client.aio) on ``loop``; its plain
    tool and transport functions run in ``asyncio.to_thread`` as the client documents."""
    from toolnexus_client.aio import Runtime

    reg, transport = _cycle_parts()
    rt = on_loop(loop, Runtime.new(target=target, registry=reg, transport=transport))

    async def cycles(n: int) -> list[float]:
        out = []
        for _ in range(n):
            t0 = time.perf_counter()
            h = await rt.spawn(rt.root, "operator")
            await rt.wake(h, peers.PROMPT)
            r = await rt.wait(h, timeout=60)
            assert r.status == "pending" and r.pending is not None, r
            done = await rt.resume({"id": r.pending.id, "ok": True})
            assert done.result is not None and done.result.text == "action performed", done
            out.append(time.perf_counter() - t0)
        return out

    try:
        yield lambda n, phases: loop.run_until_complete(cycles(n))
    finally:
        on_loop(loop, rt.detach())
