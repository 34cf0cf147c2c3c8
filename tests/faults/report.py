"""The end of a chaos run: finish every lane, take the final views, run every check, sum up the figures.

Order matters: lanes finish their cycles and the parked requests are checked
(still pending after every kill) and answered while the daemon runs; then a
Watch from seq 0 and the snapshots are taken; then the daemon is stopped so
the store can be read directly. A violation is anything acknowledged that
was lost or any completed effect that happened twice; ``losses`` counts them
and must be zero.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from toolnexus_client import HandleSnapshot

from .checks_effects import (
    EffectFigures,
    check_ask_tools,
    check_ledger,
    check_model_asks,
    check_transcript,
    effect_figures,
)
from .checks_log import check_event_log, check_requests, check_snapshots, check_turns
from .inspect_store import StoreView, read_store
from .lanes import Lane, LaneStuck
from .ledger import Execution, read_ledger
from .watcher import Watcher, replay

if TYPE_CHECKING:
    from .harness import Rig

SHOWN = 50


@dataclass
class ChaosReport:
    seed: int
    kills: int
    kill_modes: Counter[str]
    cycles: int
    wakes_recovered: int
    resumes: int
    resume_retries: int
    resume_duplicates: int
    parked: int
    events: int
    effects: EffectFigures
    seconds: float
    violations: list[str] = field(default_factory=list)
    timeline: list[str] = field(default_factory=list)

    @property
    def losses(self) -> int:
        return len(self.violations)

    def render(self) -> str:
        e = self.effects
        modes = ", ".join(f"{k} {n}" for k, n in sorted(self.kill_modes.items()))
        lines = [
            f"chaos seed {self.seed} (replay with TOOLNEXUS_CHAOS_SEED={self.seed})",
            f"  kills survived      {self.kills}  ({modes})",
            f"  cycles completed    {self.cycles}  "
            f"(wakes whose reply a kill swallowed: {self.wakes_recovered})",
            f"  resumes             {self.resumes} acknowledged, {self.resume_retries} retried across a "
            f"kill, {self.resume_duplicates} answered duplicate",
            f"  parked requests     {self.parked} pending through every kill, then answered",
            f"  events              {self.events}",
            f"  tool calls          {e.tool_calls} distinct, {e.executions} executions, "
            f"{e.reexecutions} re-executions (all in flight at a kill)",
            f"  model calls         {e.model_asks} requests, {e.model_reasks} re-issued "
            "(in flight at a kill)",
            f"  ask tool calls      {e.ask_calls} distinct, {e.ask_executions} executions, "
            f"{e.ask_executions - e.ask_calls} silent re-executions, {e.reconciled} in flight at a kill "
            "asked about (reconcile)",
            f"  losses              {self.losses}",
            f"  duration            {self.seconds:.1f} s",
        ]
        lines += [f"  ! {v}" for v in self.violations[:SHOWN]]
        if self.losses > SHOWN:
            lines.append(f"  ! ... and {self.losses - SHOWN} more")
        if self.losses:
            lines += ["  kills:"] + [f"    {t}" for t in self.timeline]
        return "\n".join(lines)


def finish(rig: Rig) -> ChaosReport:
    lanes = [lane for per_runtime in rig.lanes.values() for lane in per_runtime]
    violations = _finish_lanes(lanes)
    replays, snapshots = {}, {}
    for rt in rig.runtimes:
        watcher = rig.watchers[rt.id]
        _until_quiet(watcher)
        replays[rt.id] = replay(rt, watcher.last)
        snapshots[rt.id] = rt.list()
        watcher.stop()
        violations += watcher.problems
    exit_code = rig.daemon.stop()
    if exit_code != 0:
        violations.append(f"the daemon exited {exit_code} on SIGTERM")
    view = read_store(rig.daemon, [rt.id for rt in rig.runtimes])
    for rt in rig.runtimes:
        stored, mine = view.events[rt.id], rig.lanes[rt.id]
        violations += check_event_log(rt.id, stored, replays[rt.id], rig.watchers[rt.id].seen)
        violations += check_turns(rt.id, stored, mine)
        violations += check_snapshots(rt.id, stored, snapshots[rt.id])
        violations += check_requests(rt.id, stored, snapshots[rt.id], mine)
    ledger = read_ledger(rig.ledger.path)
    reconciled = _reconciled(lanes)
    violations += check_ledger(ledger, rig.tracker, view.events, reconciled)
    violations += check_ask_tools(ledger)
    handle_of, tags = _handle_keys(rig, snapshots)
    violations += check_model_asks(list(rig.model.asks), handle_of, rig.tracker, rig.launches)
    violations += _check_transcripts(view, tags)
    return _report(rig, lanes, view, ledger, violations)


def _reconciled(lanes: list[Lane]) -> frozenset[str]:
    """The calls a reconcile request asked about, in any lane."""
    return frozenset(cid for lane in lanes for c in lane.cycles for cid in c.reconciled)


def _finish_lanes(lanes: list[Lane]) -> list[str]:
    """Let every lane end its cycle, then see the parked requests through; report what went wrong."""
    violations = []
    for lane in lanes:
        lane.join(max(0.0, lane.ctx.deadline - time.monotonic()))
    violations += [f"lane {lane.lane} ({lane.handle}) is stuck: {lane.doing}; {_describe(lane)}"
                   for lane in lanes if lane.is_alive()]
    if lanes:  # the parked ones get their own time, even after a stuck run used the deadline up
        lanes[0].ctx.deadline = max(lanes[0].ctx.deadline, time.monotonic() + 30)
    for lane in lanes:
        if lane.parked and lane.failure is None and not lane.is_alive():
            try:
                lane.finish_parked()
            except LaneStuck as exc:
                violations.append(f"parked lane {lane.lane}: {exc}; {_describe(lane)}")
    for lane in lanes:
        if lane.failure:
            last = lane.failure.strip().splitlines()[-1]
            violations.append(f"lane {lane.lane} failed: {last}; {_describe(lane)}")
        violations += lane.problems
    return violations


def _check_transcripts(view: StoreView, tags: dict[tuple[str, str], list[str]]) -> list[str]:
    violations = []
    for (rid, hid), messages in view.messages.items():
        if hid != "root":
            violations += check_transcript(f"{rid}/{hid}", view.handles[rid][hid], messages,
                                           tags.get((rid, hid), []))
    return violations


def _describe(lane: Lane) -> str:
    """The handle as the daemon sees it now, for a report on a lane that went wrong."""
    try:
        snap = lane.rt.snapshot(lane.handle)
    except Exception as exc:
        return f"snapshot failed: {exc}"
    last = snap.last_result
    return (f"snapshot: {snap.state}, pending {snap.pending.id if snap.pending else None}, children "
            f"{list(snap.children)}, last result {last.status + ' ' + last.text[:60] if last else None}")


def _until_quiet(watcher: Watcher, quiet_s: float = 0.3, limit_s: float = 10.0) -> None:
    """Wait until the live watcher has seen nothing new for ``quiet_s``."""
    deadline = time.monotonic() + limit_s
    last = -1
    while time.monotonic() < deadline and watcher.last != last:
        last = watcher.last
        time.sleep(quiet_s)


def _handle_keys(rig: Rig, snapshots: dict[str, list[HandleSnapshot]],
                 ) -> tuple[dict[str, tuple[str, str]], dict[tuple[str, str], list[str]]]:
    """Which handle each model request spoke for, and the wake prompts each handle got, in order."""
    handle_of: dict[str, tuple[str, str]] = {}
    tags: dict[tuple[str, str], list[str]] = {}
    for rid, lanes in rig.lanes.items():
        for lane in lanes:
            if lane.cycles:
                handle_of[f"{lane.agent} {lane.cycles[0].tag}"] = (rid, lane.handle)
                tags[(rid, lane.handle)] = [c.tag for c in lane.cycles]
        for snap in snapshots[rid]:
            if snap.task_key:  # a task child: woken once, with the task's prompt
                agent, tag = snap.task_key.split(":", 1)
                handle_of[f"{agent} {tag}"] = (rid, snap.id)
                tags[(rid, snap.id)] = [tag]
    return handle_of, tags


def _report(rig: Rig, lanes: list[Lane], view: StoreView, ledger: dict[str, list[Execution]],
            violations: list[str]) -> ChaosReport:
    cycles = [c for lane in lanes for c in lane.cycles]
    resumes = [r for c in cycles for r in c.resumes]
    return ChaosReport(
        seed=rig.cfg.seed, kills=sum(rig.kill_modes.values()), kill_modes=rig.kill_modes,
        cycles=sum(1 for c in cycles if c.final is not None),
        wakes_recovered=sum(1 for c in cycles if c.wake == "recovered"),
        resumes=sum(1 for r in resumes if r.acked), resume_retries=sum(1 for r in resumes if r.attempts > 1),
        resume_duplicates=sum(1 for r in resumes if r.duplicate),
        parked=sum(1 for lane in lanes if "parked" in lane.lane),
        events=sum(len(v) for v in view.events.values()),
        effects=effect_figures(ledger, list(rig.model.asks), _reconciled(lanes)),
        seconds=time.monotonic() - rig.started, violations=violations, timeline=list(rig.timeline))
