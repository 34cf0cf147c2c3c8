"""The chaos run: many handles at work, the daemon killed with SIGKILL at random moments, then the proof.

One daemon (a real subprocess on a unix socket, a real LMDB directory), the
scripted OpenAI-compatible model over HTTP, one raw worker stream per
runtime writing the tool ledger, and lanes of top-level handles (workers,
approvers, coordinators delegating to an asker; some answered while others
run, some parked unanswered through every kill). The killer picks, per kill,
a random delay, a burst of tool results, or a resume just sent, then kills
the daemon, reads what it had committed straight from LMDB, and restarts it
on the same directory. Afterwards every lane finishes, the parked requests
are checked and answered, and ``finish`` runs every check (see checks_*).
The randomness is seeded: the seed is printed with the figures.

On PostgreSQL every ``database_every``-th fault is a database restart instead of a kill: while
tool results flow, the server is stopped (``pg_ctl stop -m fast``), kept down a moment and
started again under the running daemon, whose turns must then continue by themselves. For the
checks it counts as a fault like a kill: what was committed is read just before the database
stops, and calls and model requests sent again after it belong to the next generation.
"""

from __future__ import annotations

import contextlib
import math
import random
import shutil
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.daemon import DaemonProcess
from toolnexus_client import Runtime
from toolnexus_devtools import ScriptedModelServer

from .agents import TOP_LEVEL, ChaosModel, chaos_registry
from .inspect_store import CommitTracker
from .lanes import Lane, LaneContext
from .ledger import Ledger
from .report import ChaosReport, finish
from .watcher import Watcher
from .worker import ChaosWorker

KILL_MODES = ("delay", "delay", "burst", "resume")
DATABASE = "database"
# how long a database restart keeps the server down (seconds, from .. to)
DATABASE_DOWN_S = (0.2, 1.5)
# once the kills are over, how long the lanes get to end the cycle each is in
FINISH_S = 30.0


@dataclass(frozen=True)
class ChaosConfig:
    work_dir: Path
    seed: int
    kills: int = 10
    runtimes: int = 2
    # lanes per runtime, by agent; plus parked lanes that stay suspended through every kill
    lanes: tuple[tuple[str, int], ...] = (("worker", 3), ("approver", 2), ("coordinator", 2), ("payer", 2))
    parked: tuple[str, ...] = ("approver", "coordinator")
    max_delay_s: float = 0.5
    deadline_s: float = 120.0
    # keep the lanes cycling at least this long (a run with few or no kills still does some work)
    min_run_s: float = 0.0
    # copy the LMDB files at every kill into work_dir/kills/<n>/ (to explain a violation afterwards)
    keep_copies: bool = False
    # on PostgreSQL, every this many faults one is a database restart instead of a kill (0: none)
    database_every: int = 5


@dataclass
class Rig:
    """Everything one run built, so ``finish`` and the teardown can reach it."""

    cfg: ChaosConfig
    daemon: DaemonProcess
    model: ChaosModel
    ledger: Ledger
    tracker: CommitTracker
    runtimes: list[Runtime]
    lanes: dict[str, list[Lane]] = field(default_factory=dict)
    watchers: dict[str, Watcher] = field(default_factory=dict)
    kill_modes: Counter[str] = field(default_factory=Counter)
    # one line per kill: when, why, and the last committed seq of each runtime
    timeline: list[str] = field(default_factory=list)
    # the daemon incarnation (a one-element list, shared with the workers)
    generation: list[int] = field(default_factory=lambda: [0])
    # time.monotonic() just before each daemon was launched: places a model request in a generation
    launches: list[float] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)


def run_chaos(cfg: ChaosConfig) -> ChaosReport:
    """Build everything, kill ``cfg.kills`` times, then finish and check; always tears down."""
    cfg.work_dir.mkdir(parents=True, exist_ok=True)
    generation = [0]  # the daemon incarnation: bumped after each kill, before the next start
    model = ChaosModel()
    with ScriptedModelServer(script=model) as server, contextlib.ExitStack() as teardown:
        target = f"unix:{cfg.work_dir / 'daemon.sock'}"
        launched = time.monotonic()
        daemon = DaemonProcess(cfg.work_dir / "data", listen=(target,)).start()
        teardown.callback(_save_daemon_log, daemon, cfg.work_dir / "daemon.log")
        teardown.callback(daemon.stop)
        ledger = Ledger(cfg.work_dir / "ledger.jsonl")
        teardown.callback(ledger.close)
        llm = {"style": "openai", "base_url": server.url, "model": "scripted", "timeout_ms": 30_000}
        runtimes = [Runtime.new(target=target, registry=chaos_registry(), llm=llm,
                                options={"tool_timeout_ms": 600_000}) for _ in range(cfg.runtimes)]
        for rt in runtimes:
            teardown.callback(rt.detach)
        rig = Rig(cfg, daemon, model, ledger, CommitTracker(daemon, [r.id for r in runtimes]),
                  runtimes, generation=generation, launches=[launched])
        teardown.callback(_write_lane_logs, rig, cfg.work_dir / "lanes.log")
        for i, rt in enumerate(runtimes):
            worker = ChaosWorker(target, rt.id, ledger, lambda: generation[0], seed=cfg.seed * 1000 + i)
            teardown.callback(worker.start().stop)
        # no lane is cut while the kills run (the kill loop is bounded by itself); the deadline is set
        # once they are over
        ctx = LaneContext(threading.Event(), math.inf)
        teardown.callback(ctx.abort.set)
        resumed = threading.Event()
        ctx.on_resume = resumed.set
        _start_lanes(rig, ctx)
        teardown.callback(_stop_watchers, rig)
        for i in range(cfg.kills):
            _kill_once(rig, i, random.Random(f"{cfg.seed}:{i}"), resumed)
        time.sleep(max(0.0, rig.started + cfg.min_run_s - time.monotonic()))
        ctx.stop_cycles.set()
        # the lanes' last cycles get time of their own, however long a loaded machine took over the
        # kills: what is left of the run's deadline, and at least FINISH_S
        ctx.deadline = max(rig.started + cfg.deadline_s, time.monotonic() + FINISH_S)
        return finish(rig)


def _stop_watchers(rig: Rig) -> None:
    for watcher in rig.watchers.values():
        watcher.stop()


def _save_daemon_log(daemon: DaemonProcess, path: Path) -> None:
    """Every incarnation's log, for whoever has to explain a violation."""
    path.write_text(daemon.logs() + "\n")


def _start_lanes(rig: Rig, ctx: LaneContext) -> None:
    """Spawn every lane's handle (before any kill: Spawn is not idempotent), then start them all."""
    for r, rt in enumerate(rig.runtimes):
        plan = [(agent, False) for agent, n in rig.cfg.lanes for _ in range(n)]
        plan += [(agent, True) for agent in rig.cfg.parked]
        lanes = []
        for n, (agent, parked) in enumerate(plan):
            assert agent in TOP_LEVEL
            handle = rt.spawn(rt.root, agent)
            name = f"r{r}.{'parked-' if parked else ''}{agent}{n}"
            lanes.append(Lane(ctx, rt, name, agent, handle, seed=f"{rig.cfg.seed}:{r}:{n}", parked=parked))
        rig.lanes[rt.id] = lanes
        rig.watchers[rt.id] = Watcher(rt)
        rig.watchers[rt.id].start()
        for lane in lanes:
            lane.start()


def _kill_once(rig: Rig, index: int, rng: random.Random, resumed: threading.Event) -> None:
    """Wait for this kill's moment, SIGKILL, note what was committed, restart on the same directory."""
    mode = rng.choice(KILL_MODES)
    every = rig.cfg.database_every
    if rig.daemon.store_dsn and every > 0 and index % every == every // 2:
        _restart_database(rig, index, rng)
        return
    if mode == "delay":
        time.sleep(rng.uniform(0.02, rig.cfg.max_delay_s))
    elif mode == "burst":
        for watcher in rig.watchers.values():
            watcher.burst.clear()
        _first_of([w.burst for w in rig.watchers.values()], timeout=3.0)
        time.sleep(rng.uniform(0, 0.01))
    else:
        resumed.clear()
        resumed.wait(3.0)
        time.sleep(rng.uniform(0, 0.03))
    rig.kill_modes[mode] += 1
    killed_at = _clock()
    rig.daemon.kill9()
    if rig.cfg.keep_copies and not rig.daemon.store_dsn:  # LMDB files; a database is left as it is
        shutil.copytree(rig.daemon.data_dir, rig.cfg.work_dir / "kills" / str(index))
    rig.tracker.after_kill(index)
    rig.generation[0] += 1
    rig.launches.append(time.monotonic())
    rig.daemon.start()
    rig.timeline.append(f"kill {index} ({mode}) at {killed_at}, serving again at {_clock()}; committed "
                        f"{rig.tracker.last_seqs[-1]}")
    # let the new daemon commit something of its own before the next kill can land
    for rid, watcher in rig.watchers.items():
        watcher.wait_past(rig.tracker.last_seqs[-1].get(rid, 0), timeout=2.0)


def _restart_database(rig: Rig, index: int, rng: random.Random) -> None:
    """Mid-turn (tool results flowing), stop the database under the running daemon, keep it down a
    moment, start it again; then let the daemon commit something of its own before the next fault."""
    from tests.support.pg_fixtures import shared_server  # the server DaemonProcess put the database on

    for watcher in rig.watchers.values():
        watcher.burst.clear()
    _first_of([w.burst for w in rig.watchers.values()], timeout=3.0)
    rig.kill_modes[DATABASE] += 1
    rig.tracker.after_kill(index, beside=True)
    stopped_at = _clock()
    server = shared_server()
    server.stop()
    try:
        time.sleep(rng.uniform(*DATABASE_DOWN_S))
    finally:
        server.start()
    # the next generation begins once the database is back: what the daemon sends again then (the
    # turns it continues) is of it, whatever it had sent before the database went away is not
    rig.generation[0] += 1
    rig.launches.append(time.monotonic())
    rig.timeline.append(f"fault {index} (database restart) down at {stopped_at}, up at {_clock()}; committed "
                        f"{rig.tracker.last_seqs[-1]}")
    for rid, watcher in rig.watchers.items():
        watcher.wait_past(rig.tracker.last_seqs[-1].get(rid, 0), timeout=10.0)


def _write_lane_logs(rig: Rig, path: Path) -> None:
    """Each lane's cycles and the retries on its way, next to the kill timeline."""
    lines = [f"seed {rig.cfg.seed}", *rig.timeline]
    for lanes in rig.lanes.values():
        for lane in lanes:
            lines.append(f"== {lane.lane} {lane.handle}: {len(lane.cycles)} cycles, now: {lane.doing}")
            lines += [f"   {c.tag}: wake {c.wake}, requests {c.requests}, resumes "
                      f"{[(r.request_id, r.ok, r.attempts, r.duplicate) for r in c.resumes]}, final "
                      f"{c.final.status + ' ' + c.final.text[:50] if c.final else None}" for c in lane.cycles]
            lines += [f"   . {entry}" for entry in lane.log]
    path.write_text("\n".join(lines) + "\n")


def _clock() -> str:
    """Wall-clock time as the daemon's event ``at`` shows it (UTC, milliseconds)."""
    now = time.time()
    return time.strftime("%H:%M:%S", time.gmtime(now)) + f".{int(now * 1000) % 1000:03d}"


def _first_of(events: list[threading.Event], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not any(e.is_set() for e in events) and time.monotonic() < deadline:
        time.sleep(0.002)
