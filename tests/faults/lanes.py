"""Lanes: each drives one top-level handle through wake → (resume)* → final result, cycle after cycle.

A lane is a thread using the Python client. Every RPC may hit a dead daemon;
a lane then retries once the daemon is back, resolving what it cannot know:
a Wake whose reply was lost is looked up in a snapshot (did this cycle's turn
start?) before it is sent again, and a Resume is simply repeated with the
identical answer (a repeat is answered ``duplicate``). What each lane saw and
was acknowledged is kept for the checks. A *parked* lane wakes once and
leaves its request unanswered until the kills are over. A ``reconcile`` request (a call of
an ``on_crash="ask"`` tool was in flight at a kill) is answered as a person would: it
completed, with this output, or it did not.
"""

from __future__ import annotations

import random
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from toolnexus_client import (
    Cancelled,
    DeadlineExceeded,
    FailedPrecondition,
    HandleSnapshot,
    Internal,
    Runtime,
    TaskResult,
    ToolnexusError,
    Unavailable,
)

T = TypeVar("T")
# what a kill -9 looks like from the client: the connection or the stream broke
TRANSIENT = (Unavailable, DeadlineExceeded, Cancelled, Internal)
RETRY_S = 0.05
WAIT_S = 3.0


class LaneStuck(Exception):
    """The lane could not finish before the run's deadline."""


@dataclass
class Resume:
    request_id: str
    ok: bool
    data: dict[str, object] | None = None
    attempts: int = 0
    acked: bool = False
    duplicate: bool = False


@dataclass
class Cycle:
    tag: str
    wake: str  # "acked", or "recovered": the Wake landed but its reply was lost to a kill
    requests: list[str] = field(default_factory=list)
    resumes: list[Resume] = field(default_factory=list)
    final: TaskResult | None = None
    # call_ids a reconcile request asked about (their results came from the answer, not a run)
    reconciled: list[str] = field(default_factory=list)


@dataclass
class LaneContext:
    """What every lane shares: the stop flag, the deadline, the hook the killer listens to."""

    stop_cycles: threading.Event
    deadline: float
    on_resume: Callable[[], None] = lambda: None
    # set when the run is torn down early (an error in the harness): every lane gives up at once
    abort: threading.Event = field(default_factory=threading.Event)


class Lane(threading.Thread):
    def __init__(self, ctx: LaneContext, rt: Runtime, name: str, agent: str, handle: str, seed: str,
                 parked: bool = False) -> None:
        super().__init__(name=f"lane-{name}", daemon=True)
        self.ctx, self.rt, self.lane, self.agent, self.handle = ctx, rt, name, agent, handle
        self.parked = parked
        self.rng = random.Random(seed)
        self.cycles: list[Cycle] = []
        self.problems: list[str] = []
        self.failure: str | None = None
        self.doing = "starting"  # what the lane is blocked on, for a report on a stuck run
        self.log: list[str] = []  # what went wrong on the way (retries), for a report on a violation

    # ------------------------------------------------------------------ the loop

    def run(self) -> None:
        try:
            while not self.ctx.stop_cycles.is_set() or (self.parked and not self.cycles):
                tag = f"{self.lane}#c{len(self.cycles) + 1}"
                cycle = Cycle(tag, wake=self._wake(tag))
                self.cycles.append(cycle)
                self._until_final(cycle)
                if self.parked:
                    return
                time.sleep(self.rng.uniform(0, 0.03))
        except Exception:
            self.failure = traceback.format_exc()

    def finish_parked(self) -> None:
        """After the kills: the parked request is still pending; answer it and see the cycle through."""
        cycle = self.cycles[-1]
        snap = self._retry(lambda: self.rt.snapshot(self.handle), "snapshot of the parked handle")
        if snap.state != "suspended" or snap.pending is None or snap.pending.id not in cycle.requests:
            self.problems.append(f"{self.handle}: parked request {cycle.requests} not pending any more "
                                 f"(state {snap.state}, pending {snap.pending})")
            return
        self.parked = False
        self._answer(cycle, snap.pending.id)
        self._until_final(cycle)

    # ------------------------------------------------------------------ verbs that survive kills

    def _retry(self, call: Callable[[], T], doing: str = "") -> T:
        self.doing = doing or self.doing
        while True:
            self._check_deadline()
            try:
                return call()
            except TRANSIENT as err:
                self._transient(err)

    def _transient(self, err: ToolnexusError) -> None:
        now = time.strftime("%H:%M:%S", time.gmtime())
        self.log.append(f"{now} {self.doing}: {err.code} {str(err)[:80]}")
        time.sleep(RETRY_S)

    def _wake(self, tag: str) -> str:
        self.doing = f"wake {tag}"
        while True:
            self._check_deadline()
            try:
                self.rt.wake(self.handle, tag)
                return "acked"
            except FailedPrecondition:
                if self._woken(tag):  # an earlier attempt landed after all
                    return "recovered"
                raise
            except TRANSIENT as err:
                self._transient(err)
                if self._woken(tag):
                    self.log.append(f"wake {tag} had landed although its reply was lost")
                    return "recovered"

    def _woken(self, tag: str) -> bool:
        snap: HandleSnapshot = self._retry(lambda: self.rt.snapshot(self.handle), f"did wake {tag} land?")
        if snap.state in ("running", "suspended"):
            return True
        return snap.state == "idle" and snap.last_result is not None and tag in snap.last_result.text

    def _until_final(self, cycle: Cycle) -> None:
        while True:
            result = self._retry(lambda: self.rt.wait(self.handle, timeout=WAIT_S), f"wait {cycle.tag}")
            if result.status == "timeout":
                continue
            if result.status == "pending" and result.pending is not None:
                request = result.pending.id
                reconcile = result.pending.kind == "reconcile"
                if reconcile:
                    self._reconciling(cycle, result.pending.data or {})
                elif cycle.tag not in request:
                    self.problems.append(f"{self.handle}: cycle {cycle.tag} got another's pending {request}")
                if request not in cycle.requests:
                    cycle.requests.append(request)
                if self.parked:
                    return
                self._answer(cycle, request, reconcile)
                continue
            if cycle.tag not in result.text:
                self.problems.append(f"{self.handle}: cycle {cycle.tag} ended with {result.status} "
                                     f"{result.text[:120]!r}")
            cycle.final = result
            return

    def _reconciling(self, cycle: Cycle, data: dict[str, object]) -> None:
        """A reconcile request must be about a call of this cycle (its arguments carry the tag)."""
        args = data.get("arguments")
        if not isinstance(args, dict) or args.get("tag") != cycle.tag or data.get("tool") != "charge":
            self.problems.append(f"{self.handle}: cycle {cycle.tag} got a reconcile about {data}")
        call_id = str(data.get("call_id"))
        if call_id not in cycle.reconciled:
            cycle.reconciled.append(call_id)

    def _answer(self, cycle: Cycle, request: str, reconcile: bool = False) -> None:
        if any(r.request_id == request and r.acked for r in cycle.resumes):
            return  # answered already; the handle is on its way
        ok = self.rng.random() < 0.8
        data: dict[str, object] | None = None
        if reconcile and ok:
            data = {"output": f"charged {cycle.tag} (reconciled)"}
        resume = Resume(request, ok=ok, data=data)
        cycle.resumes.append(resume)
        time.sleep(self.rng.uniform(0, 0.03))
        self.ctx.on_resume()
        self.doing = f"resume {request}"
        while True:
            self._check_deadline()
            resume.attempts += 1
            try:
                answer = {"id": request, "ok": resume.ok, **({"data": resume.data} if resume.data else {})}
                reply = self.rt.resume(answer)
            except TRANSIENT as err:
                self._transient(err)
                continue
            except ToolnexusError as err:
                self.problems.append(f"{self.handle}: resume {request} refused: {err.code} {err}")
                return
            resume.acked, resume.duplicate = True, reply.duplicate
            return

    def _check_deadline(self) -> None:
        if time.monotonic() > self.ctx.deadline or self.ctx.abort.is_set():
            raise LaneStuck(f"{self.handle} did not finish in time (cycle {len(self.cycles)}: {self.doing})")
