"""The chaos run for a cluster: three daemons on one PostgreSQL database, faults spread over them.

Every daemon listens on a fixed loopback port, so a killed one comes back on the same
address, and reaches the database through a proxy of its own that can stall. Lanes of
top-level handles (one per lane, spawned before any fault) cycle: Wake, Wait until the
approval webhook suspends the turn, Resume, Snapshot, Wait until done — each call sent to a
daemon picked at random and retried on UNAVAILABLE, as a client of any replica would. The
faulter picks a random daemon and one of three faults:

- ``kill``: ``kill -9``, started again a moment later;
- ``stop``: ``SIGSTOP`` past its lease, then ``SIGCONT`` (a paused process, a long GC, a VM
  migration): the survivors take its runtimes over while it sleeps, and when it wakes it must
  not act on them;
- ``stall``: its database connections black-holed past its lease (nothing forwarded, nothing
  dropped, no error), then let through again: the cut-off owner must stop serving on its own.

Afterwards:

- every runtime's event log, read through a random daemon, is gapless and in order;
- every acknowledged cycle is in the log (a done result after its resume) and every handle
  ends idle with the tool's text;
- the approval tool (a webhook on the scripted model server that writes a ledger) ran an
  approved call twice only when a kill, or a take-over of its runtime from an owner starved
  past its lease, fell between the first run and the commit of its result: a completed call
  never ran again.

A lane that does not finish is reported with the daemons' last log lines about its handle.

Given the ``database`` server, every ``database_every``-th fault restarts it instead of killing
a daemon: stopped in the middle of turns, kept down a moment, started again under the running
daemons, whose turns must continue by themselves (an approved call sent again after it counts
as in flight at a fault, like one at a kill).
"""

from __future__ import annotations

import json
import math
import os
import random
import signal
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import grpc

from tests.support.daemon import DaemonProcess
from tests.support.grpc_client import approval_agent, openai_llm
from tests.support.pg import PgServer
from tests.support.stall_proxy import StallProxy
from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_daemon.api._gen import runtime_pb2_grpc as pb_grpc
from toolnexus_devtools import ScriptedModelServer
from toolnexus_devtools.approval_tool import handle_approval
from toolnexus_devtools.model_server import Received, chat_response, tool_call

T = TypeVar("T")
LEDGER_PATH = "/tools/ledger-approval"
DONE = "action performed"
# once the kills are over, how long the lanes get to end the cycle each is in
FINISH_S = 30.0
# how long a database restart keeps the server down (seconds, from .. to), on top of the stop and
# start themselves: mostly shorter than a lease, so the owners keep their runtimes through it
DATABASE_DOWN_S = (0.1, 0.5)
FAULT_KINDS = ("kill", "stop", "stall")


@dataclass(frozen=True)
class ClusterChaosConfig:
    work_dir: Path
    dsn: str
    seed: int
    kills: int = 6
    nodes: int = 3
    runtimes: int = 2
    lanes_per_runtime: int = 2
    lease_ms: int = 1000
    deadline_s: float = 120.0
    # the server of ``dsn``: every ``database_every``-th fault restarts it instead of a kill
    database: PgServer | None = None
    database_every: int = 5
    # the faults to draw from, each equally likely
    fault_kinds: tuple[str, ...] = FAULT_KINDS


@dataclass
class ClusterChaosReport:
    seed: int
    kills: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)
    cycles: int = 0
    resumes: int = 0
    retries: int = 0
    duplicates: int = 0
    executions: int = 0
    reexecutions: int = 0
    events: int = 0
    reads: int = 0
    stale_reads: int = 0
    violations: list[str] = field(default_factory=list)
    # the daemons' last log lines about each lane that did not finish: what CI shows of a loss
    clues: list[str] = field(default_factory=list)
    duration_s: float = 0.0

    @property
    def losses(self) -> int:
        return len(self.violations)

    def render(self) -> str:
        kinds = ", ".join(f"{n} {k}" for k, n in sorted(self.by_kind.items()))
        lines = [f"cluster chaos seed {self.seed} (replay with TOOLNEXUS_CHAOS_SEED={self.seed})",
                 f"  faults survived     {self.kills} ({kinds})",
                 f"  cycles completed    {self.cycles}",
                 f"  resumes             {self.resumes} acknowledged, {self.retries} calls retried, "
                 f"{self.duplicates} answered duplicate",
                 f"  events              {self.events}",
                 f"  reads checked       {self.reads}, {self.stale_reads} stale",
                 f"  approved executions {self.executions}, {self.reexecutions} re-run "
                 "(each in flight at a fault or a take-over)",
                 f"  losses              {self.losses}",
                 f"  duration            {self.duration_s:.1f} s"]
        return "\n".join(lines + [f"  ! {v}" for v in self.violations[:50]]
                         + [f"  > {c}" for c in self.clues])


class Ledger:
    """Every run of the approval webhook: (time, call_id, approved)."""

    def __init__(self) -> None:
        self.runs: list[tuple[float, str, bool]] = []
        self._lock = threading.Lock()

    def serve(self, req: Received) -> Any:
        call = req.json() or {}
        answer = call.get("answer")
        with self._lock:
            self.runs.append((time.time(), str(call.get("call_id")), isinstance(answer, dict)
                              and bool(answer.get("ok"))))
        return handle_approval(call)


def approve_every_turn(body: dict[str, Any]) -> dict[str, Any]:
    """The model: every new user message asks for the approval tool (a call id of its own per
    turn); the tool's result is the answer."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    if messages and messages[-1].get("role") == "tool":
        return chat_response(content=str(messages[-1].get("content") or ""), usage=(2, 1, 3))
    turn = sum(1 for m in messages if m.get("role") == "user")
    return chat_response(tool_calls=[tool_call("approve", {}, id=f"call_{turn}")], usage=(3, 2, 5))


class Cluster:
    """The daemons, each on a fixed port and behind a database proxy of its own; ``stub()`` picks
    a live one at random."""

    def __init__(self, cfg: ClusterChaosConfig, ports: list[int]) -> None:
        self.proxies: list[StallProxy] = []
        self.procs: list[DaemonProcess] = []
        for i, port in enumerate(ports):
            proxy, dsn = StallProxy.for_dsn(cfg.dsn)
            self.proxies.append(proxy)
            self.procs.append(DaemonProcess(cfg.work_dir / f"n{i}", "--store", dsn, "--advertise",
                                            "127.0.0.1:0", "--node-id", f"n{i}", "--lease-ms",
                                            str(cfg.lease_ms), listen=(f"127.0.0.1:{port}",)))
        self.targets = [f"127.0.0.1:{port}" for port in ports]
        self._channels = [grpc.insecure_channel(t) for t in self.targets]
        self.stubs = [pb_grpc.AgentRuntimeStub(c) for c in self._channels]

    def stub(self, rng: random.Random) -> pb_grpc.AgentRuntimeStub:
        return rng.choice(self.stubs)

    def fault(self, kind: str, node: int, lease_s: float, rng: random.Random) -> None:
        """One fault on one daemon, over when this returns (the daemon serving, or back from its
        pause or its cut)."""
        proc, proxy = self.procs[node], self.proxies[node]
        if kind == "kill":
            proc.kill9()
            time.sleep(rng.uniform(0, lease_s))
            proc.start()
        elif kind == "stop":
            assert proc.proc is not None
            os.kill(proc.proc.pid, signal.SIGSTOP)
            try:
                time.sleep(rng.uniform(1.5, 2.5) * lease_s)
            finally:
                os.kill(proc.proc.pid, signal.SIGCONT)
        elif kind == "stall":
            proxy.stall()
            try:
                time.sleep(rng.uniform(1.5, 2.5) * lease_s)
            finally:
                proxy.resume()
        else:
            raise ValueError(f"unknown fault {kind!r}: want one of {', '.join(FAULT_KINDS)}")

    def close(self) -> None:
        for channel in self._channels:
            channel.close()
        for proxy in self.proxies:
            proxy.resume()
        for proc in self.procs:
            if proc.proc is not None and proc.proc.poll() is None:
                os.kill(proc.proc.pid, signal.SIGCONT)
            proc.stop()
        for proxy in self.proxies:
            proxy.close()


class Lane(threading.Thread):
    """One handle cycling through suspend and resume, every call to a random daemon."""

    def __init__(self, cluster: Cluster, rid: str, handle: str, seed: str, stop: threading.Event,
                 report: ClusterChaosReport, deadline: float) -> None:
        super().__init__(name=f"lane {handle}", daemon=True)
        self.cluster, self.rid, self.handle = cluster, rid, handle
        self.rng, self.stop_cycles, self.report, self.deadline = random.Random(seed), stop, report, deadline
        self.cycles = 0
        self.error: BaseException | None = None
        # what this lane's acknowledged calls and completed reads established: a read that began
        # after them must not show less
        self.answered: set[str] = set()
        self.turns_seen = 0

    def run(self) -> None:
        try:
            while not self.stop_cycles.is_set():
                self._cycle()
                self.cycles += 1
        except BaseException as exc:  # reported by the harness, never swallowed
            self.error = exc

    def _call(self, fn: Callable[[pb_grpc.AgentRuntimeStub], T]) -> T:
        while True:
            try:
                return fn(self.cluster.stub(self.rng))
            except grpc.RpcError as err:
                if err.code() not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                    raise
                if time.monotonic() > self.deadline:
                    raise TimeoutError(f"{self.handle}: still UNAVAILABLE at the deadline") from err
                self.report.retries += 1
                time.sleep(0.05)

    def _stale(self, what: str) -> None:
        self.report.stale_reads += 1
        self.report.violations.append(f"{self.handle}: stale read: {what}")

    def _read_wait(self, request: pb.WaitRequest) -> pb.TaskResult:
        answered = set(self.answered)  # what was acknowledged before this read began
        result: pb.TaskResult = self._call(lambda s: s.Wait(request, timeout=10))
        self.report.reads += 1
        if result.status == "pending" and result.pending.id in answered:
            self._stale(f"Wait shows {result.pending.id} pending after its answer was acknowledged")
        return result

    def _read_snapshot(self) -> pb.HandleSnapshot:
        answered, turns = set(self.answered), self.turns_seen
        request = pb.SnapshotRequest(runtime_id=self.rid, handle=self.handle)
        snap: pb.HandleSnapshot = self._call(lambda s: s.Snapshot(request, timeout=10))
        self.report.reads += 1
        if snap.state == "suspended" and snap.pending.id in answered:
            self._stale(f"Snapshot shows {snap.pending.id} open after its answer was acknowledged")
        if snap.turns_total < turns:
            self._stale(f"Snapshot shows {snap.turns_total} turns after a read showed {turns}")
        self.turns_seen = max(self.turns_seen, snap.turns_total)
        return snap

    def _wait(self, want: str) -> pb.TaskResult:
        request = pb.WaitRequest(runtime_id=self.rid, handle=self.handle, timeout_ms=5000)
        while True:
            result = self._read_wait(request)
            if result.status == want:
                return result
            if time.monotonic() > self.deadline:
                raise TimeoutError(f"{self.handle}: waited for {want}, last {result.status} {result.text!r}")

    def _cycle(self) -> None:
        wake = pb.WakeRequest(runtime_id=self.rid, handle=self.handle, prompt="do the thing")
        try:
            self._call(lambda s: s.Wake(wake, timeout=10))
        except grpc.RpcError as err:  # a retried Wake whose first try landed: the turn is under way
            if err.code() is not grpc.StatusCode.FAILED_PRECONDITION:
                raise
        pending = self._wait("pending")
        answer = pb.ResumeRequest(runtime_id=self.rid, answer=pb.Answer(id=pending.pending.id, ok=True))
        out = self._call(lambda s: s.Resume(answer, timeout=20))
        self.answered.add(pending.pending.id)
        self.report.resumes += 1
        self.report.duplicates += int(out.duplicate)
        self._read_snapshot()
        if out.result.status != "done":
            self._wait("done")


def run_cluster_chaos(cfg: ClusterChaosConfig, ports: list[int]) -> ClusterChaosReport:
    """Build the cluster, inject ``cfg.kills`` faults, finish the lanes, check; always tears down."""
    cfg.work_dir.mkdir(parents=True, exist_ok=True)
    report = ClusterChaosReport(seed=cfg.seed)
    started = time.monotonic()
    rng = random.Random(cfg.seed)
    ledger = Ledger()
    kills: list[tuple[float, float]] = []  # (fault began, fault over), wall clock
    with ScriptedModelServer() as model:
        model.route(LEDGER_PATH, ledger.serve)
        model.script = approve_every_turn
        cluster = Cluster(cfg, ports)
        try:
            for proc in cluster.procs:
                proc.start()
            lanes = _lanes(cluster, cfg, model, report, rng, math.inf)  # no deadline while the faults run
            for index in range(cfg.kills):
                time.sleep(rng.uniform(0.2, 1.0))
                every = cfg.database_every
                if cfg.database is not None and every > 0 and index % every == every // 2:
                    kind = "database restart"
                    kills.append(_restart_database(cfg.database, rng))
                else:
                    kind = rng.choice(cfg.fault_kinds)
                    began = time.time()
                    cluster.fault(kind, rng.randrange(len(cluster.procs)), cfg.lease_ms / 1000, rng)
                    kills.append((began, time.time()))
                report.kills += 1
                report.by_kind[kind] = report.by_kind.get(kind, 0) + 1
            finish_by = max(started + cfg.deadline_s, time.monotonic() + FINISH_S)
            for lane in lanes:  # the last cycles get time of their own however long the faults took
                lane.deadline = finish_by
                lane.stop_cycles.set()
            for lane in lanes:
                lane.join(max(1.0, finish_by - time.monotonic()))
                if lane.is_alive() or lane.error is not None:
                    report.violations.append(f"lane {lane.handle} did not finish: {lane.error!r}")
            report.cycles = sum(lane.cycles for lane in lanes)
            _check(cluster, lanes, ledger, kills, report, rng)
            told = " ".join(report.violations)
            report.clues = _clues(cluster, [lane for lane in lanes if lane.handle in told])
        finally:
            cluster.close()
    report.duration_s = time.monotonic() - started
    return report


def _restart_database(server: PgServer, rng: random.Random) -> tuple[float, float]:
    """Stop the database under the running daemons, keep it down a moment, start it again; returns
    (stopped at, started at), wall clock."""
    stopped = time.time()
    server.stop()
    try:
        time.sleep(rng.uniform(*DATABASE_DOWN_S))
    finally:
        server.start()
    return stopped, time.time()


def _lanes(cluster: Cluster, cfg: ClusterChaosConfig, model: ScriptedModelServer, report: ClusterChaosReport,
           rng: random.Random, deadline: float) -> list[Lane]:
    """Every runtime and handle made before any kill (Spawn is not idempotent), then the lanes started."""
    stop = threading.Event()
    agent = approval_agent("approver", model.origin + LEDGER_PATH)
    lanes = []
    for r in range(cfg.runtimes):
        stub = cluster.stub(rng)
        rid = stub.New(pb.NewRequest(agents=[agent], llm=openai_llm(model.url, timeout_ms=10_000)),
                       timeout=10).runtime_id
        for n in range(cfg.lanes_per_runtime):
            handle = stub.Spawn(pb.SpawnRequest(runtime_id=rid, agent="approver"), timeout=10).handle
            lanes.append(Lane(cluster, rid, handle, f"{cfg.seed}:{r}:{n}", stop, report, deadline))
    for lane in lanes:
        lane.start()
    return lanes


def _check(cluster: Cluster, lanes: list[Lane], ledger: Ledger, kills: list[tuple[float, float]],
           report: ClusterChaosReport, rng: random.Random) -> None:
    by_runtime: dict[str, list[Lane]] = defaultdict(list)
    for lane in lanes:
        by_runtime[lane.rid].append(lane)
    done_at: dict[str, float] = {}
    for rid, mine in by_runtime.items():
        events = _events(cluster, rid, rng)
        report.events += len(events)
        seqs = [e.seq for e in events]
        if seqs != list(range(1, len(seqs) + 1)):
            report.violations.append(f"{rid}: event seqs not gapless and in order: {_gaps(seqs)}")
        for e in events:
            if e.type == "tool_result" and e.data and "call_id" in e.data.fields:
                done_at.setdefault(e.data.fields["call_id"].string_value, _epoch(e.at))
        for lane in mine:
            _check_lane(cluster, lane, events, report, rng)
    _check_ledger(ledger, done_at, kills, _takeovers(cluster), report)


def _check_lane(cluster: Cluster, lane: Lane, events: list[pb.Event], report: ClusterChaosReport,
                rng: random.Random) -> None:
    snap = _retrying(lambda: cluster.stub(rng).Snapshot(
        pb.SnapshotRequest(runtime_id=lane.rid, handle=lane.handle), timeout=10))
    if snap.state == "suspended":  # a Wake retried across a kill queued one more turn: answer it
        answer = pb.ResumeRequest(runtime_id=lane.rid, answer=pb.Answer(id=snap.pending.id, ok=True))
        _retrying(lambda: cluster.stub(rng).Resume(answer, timeout=20))
        snap = _retrying(lambda: cluster.stub(rng).Snapshot(
            pb.SnapshotRequest(runtime_id=lane.rid, handle=lane.handle), timeout=10))
    if snap.state != "idle" or snap.last_result.text != DONE:
        report.violations.append(f"{lane.handle}: ends {snap.state} {snap.last_result.text!r}")
    done = sum(1 for e in events
               if e.handle == lane.handle and e.type == "result" and e.result.status == "done")
    if done < lane.cycles:
        report.violations.append(f"{lane.handle}: {lane.cycles} cycles acknowledged, {done} done in the log")


def _check_ledger(ledger: Ledger, done_at: dict[str, float], kills: list[tuple[float, float]],
                  takeovers: dict[str, list[float]], report: ClusterChaosReport) -> None:
    """An approved call that ran twice must have had a fault, or a take-over of its runtime, between
    its first run and its result's commit; otherwise a completed call ran again. (A loaded machine
    can starve a live owner past its lease: the runtime is taken over without a kill, and the old
    owner's run of the call in flight never commits its result.)"""
    runs: dict[str, list[float]] = defaultdict(list)
    for at, call_id, approved in ledger.runs:
        if approved:
            runs[call_id].append(at)
    report.executions = sum(len(v) for v in runs.values())
    for call_id, times in runs.items():
        if len(times) < 2:
            continue
        report.reexecutions += len(times) - 1
        committed = done_at.get(call_id, float("inf"))
        if any(t > committed + 0.2 for t in times[1:]):
            report.violations.append(f"call {call_id} ran again after its result was committed")
        elif not any(times[0] - 0.5 <= at <= committed + 0.5
                     for at in [killed for killed, _ in kills] + takeovers.get(call_id.split("/", 1)[0], [])):
            report.violations.append(f"call {call_id} ran {len(times)} times with no kill or take-over "
                                     "before its result")


def _takeovers(cluster: Cluster) -> dict[str, list[float]]:
    """When each runtime was taken over (the daemons' ``runtime taken over`` lines), by runtime."""
    out: dict[str, list[float]] = defaultdict(list)
    for proc in cluster.procs:
        for line in proc.log_lines:
            if '"runtime taken over"' not in line:
                continue
            rec = json.loads(line)
            out[str(rec["runtime"])].append(_epoch(str(rec["time"])))
    return out


def _clues(cluster: Cluster, lanes: list[Lane], per_lane: int = 8) -> list[str]:
    """The last log lines each daemon wrote about ``lanes`` (a stuck handle's last known step)."""
    out: list[str] = []
    for lane in lanes:
        for i, proc in enumerate(cluster.procs):
            mine = [line for line in proc.log_lines if lane.rid in line and f'"{lane.handle}"' in line]
            out += [f"n{i} {line[:400]}" for line in mine[-per_lane:]]
    return out


def _events(cluster: Cluster, rid: str, rng: random.Random) -> list[pb.Event]:
    """The whole log: Watch rounds, each after the last seq read, until one brings nothing new
    (a replay of a long run does not fit one call's deadline)."""
    def read(after: int) -> list[pb.Event]:
        out: list[pb.Event] = []
        try:
            for event in cluster.stub(rng).Watch(pb.WatchRequest(runtime_id=rid, after_seq=after), timeout=3):
                out.append(event)
        except grpc.RpcError as err:
            if err.code() is not grpc.StatusCode.DEADLINE_EXCEEDED:
                raise
        return out

    events: list[pb.Event] = []
    for _ in range(10_000):  # bounded: each round reads at least one event or ends the loop
        after = events[-1].seq if events else 0
        batch = _retrying(lambda: read(after))  # noqa: B023 (called at once, inside this round)
        if not batch:
            break
        events += batch
    return events


def _retrying(fn: Callable[[], T]) -> T:
    deadline = time.monotonic() + 30
    while True:
        try:
            return fn()
        except grpc.RpcError as err:
            if err.code() is not grpc.StatusCode.UNAVAILABLE or time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def _epoch(at: str) -> float:
    """An event's ``at`` (RFC 3339, UTC, milliseconds) as seconds since the epoch."""
    from datetime import datetime

    return datetime.fromisoformat(at.replace("Z", "+00:00")).timestamp()


def _gaps(seqs: list[int]) -> str:
    return ", ".join(f"{a}→{b}" for a, b in zip(seqs, seqs[1:], strict=False) if b != a + 1)[:300]
