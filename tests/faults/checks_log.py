"""Checks on the event log: gapless, replayed faithfully, one final result per acknowledged verb.

Inputs are the final stored events (read from LMDB), what a Watch from seq 0
replayed, what the live watcher saw during the run, the final snapshots and
what each lane was acknowledged. Each check returns the violations it found,
as sentences a person can act on; an empty list is a pass.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolnexus_client import HandleSnapshot
from toolnexus_daemon.model import Event, TaskResult

from .lanes import Lane


def _shape(event: Any) -> tuple[Any, ...]:
    """What two views of one event must agree on (daemon-side and client-side Events alike)."""
    return (event.seq, str(event.type), event.handle, event.note, event.from_state, event.to_state)


def check_event_log(rid: str, stored: list[Event], replayed: Sequence[Any],
                    live: dict[int, Any]) -> list[str]:
    problems = []
    seqs = [e.seq for e in stored]
    if seqs != list(range(1, len(seqs) + 1)):
        gaps = sorted(set(range(1, max(seqs, default=0) + 1)) - set(seqs))[:10]
        problems.append(f"{rid}: stored seqs are not 1..{len(seqs)} (missing {gaps})")
    by_seq = {e.seq: e for e in stored}
    if [_shape(e) for e in replayed] != [_shape(e) for e in stored]:
        first = next((i for i, (a, b) in enumerate(zip(replayed, stored, strict=False))
                      if _shape(a) != _shape(b)), min(len(replayed), len(stored)))
        problems.append(f"{rid}: Watch from 0 gave {len(replayed)} events, the store holds {len(stored)}; "
                        f"first difference at position {first}")
    for seq, event in sorted(live.items()):
        kept = by_seq.get(seq)
        if kept is None or _shape(kept) != _shape(event):
            problems.append(f"{rid}: event {seq} was shown live ({event.note!r}) but the store has "
                            f"{kept.note if kept else 'nothing'!r}: a Watch saw state that was lost")
    return problems


@dataclass
class Turn:
    """One wake of a handle as the event log tells it."""

    start_seq: int
    pendings: list[str] = field(default_factory=list)
    resumed: list[str] = field(default_factory=list)
    final: TaskResult | None = None


def turns_of(handle: str, events: Iterable[Event]) -> tuple[list[Turn], list[str]]:
    turns: list[Turn] = []
    problems: list[str] = []
    open_turn: Turn | None = None
    for e in events:
        if e.type == "transition" and e.note.endswith("(wake)"):
            if open_turn is not None:
                problems.append(f"{handle}: woken at seq {e.seq} while the turn of seq "
                                f"{open_turn.start_seq} was still open")
            open_turn = Turn(e.seq)
            turns.append(open_turn)
        elif e.type in ("result", "resumed") and open_turn is None:
            problems.append(f"{handle}: {e.type} at seq {e.seq} outside any turn")
        elif e.type == "resumed" and open_turn is not None:
            open_turn.resumed.append(str((e.data or {}).get("request_id")))
        elif e.type == "result" and open_turn is not None and e.result is not None:
            if e.result.status == "pending" and e.result.pending is not None:
                open_turn.pendings.append(e.result.pending.id)
            else:
                open_turn.final, open_turn = e.result, None
    return turns, problems


def check_turns(rid: str, stored: list[Event], lanes: list[Lane]) -> list[str]:
    """Every turn ended once, answered what it asked; each lane's cycles are exactly its turns."""
    by_handle: dict[str, list[Event]] = defaultdict(list)
    for e in stored:
        by_handle[e.handle].append(e)
    problems: list[str] = []
    turns: dict[str, list[Turn]] = {}
    for handle, events in by_handle.items():
        turns[handle], found = turns_of(handle, events)
        problems += found
        for t in turns[handle]:
            if t.final is None or t.final.status != "done":
                problems.append(f"{rid}/{handle}: the turn woken at seq {t.start_seq} ended "
                                f"{t.final.status + ' ' + t.final.text[:80] if t.final else 'never'}")
            if t.pendings != t.resumed:
                problems.append(f"{rid}/{handle}: turn of seq {t.start_seq} suspended on {t.pendings} "
                                f"but was resumed for {t.resumed}")
    for lane in lanes:
        problems += _lane_vs_turns(rid, lane, turns.get(lane.handle, []))
    return problems


def _lane_vs_turns(rid: str, lane: Lane, turns: list[Turn]) -> list[str]:
    where = f"{rid}/{lane.handle}"
    if len(turns) != len(lane.cycles):
        return [f"{where}: the lane's {len(lane.cycles)} wakes produced {len(turns)} turns"]
    problems = []
    for cycle, turn in zip(lane.cycles, turns, strict=True):
        final = cycle.final
        if final is None or turn.final is None or (final.status, final.text) != (turn.final.status,
                                                                                   turn.final.text):
            problems.append(f"{where}: cycle {cycle.tag} was told {final} but the log ended it with "
                            f"{turn.final}")
        if sorted(cycle.requests) != sorted(set(turn.pendings)):
            problems.append(f"{where}: cycle {cycle.tag} saw requests {cycle.requests}, "
                            f"the log {turn.pendings}")
        for resume in cycle.resumes:
            if resume.acked and turn.resumed.count(resume.request_id) != 1:
                problems.append(f"{where}: acknowledged resume of {resume.request_id} is in the log "
                                f"{turn.resumed.count(resume.request_id)} times")
    return problems


def check_snapshots(rid: str, stored: list[Event], snapshots: list[HandleSnapshot]) -> list[str]:
    """Each snapshot is what its handle's events add up to: state, last result, turns and tokens."""
    problems = []
    by_handle: dict[str, list[Event]] = defaultdict(list)
    for e in stored:  # one pass: a long run has about 100,000 events and thousands of handles
        by_handle[e.handle].append(e)
    own_tokens = {h: sum(int(((e.data or {}).get("usage") or {}).get("total_tokens") or 0)
                         for e in events if e.type == "model_call") for h, events in by_handle.items()}
    for snap in snapshots:
        mine = by_handle.get(snap.id, [])
        states = [e.to_state for e in mine if e.type == "transition"]
        results = [e.result for e in mine if e.type == "result" and e.result is not None]
        calls = [e for e in mine if e.type == "model_call"]
        tokens = sum(n for h, n in own_tokens.items() if h == snap.id or h.startswith(snap.id + "/"))
        last = results[-1] if results else None
        seen = (snap.last_result.status, snap.last_result.text) if snap.last_result else None
        facts = {"state": (states[-1] if states else "idle", snap.state),
                 "last result": ((last.status, last.text) if last else None, seen),
                 "turns_total": (len(calls), snap.turns_total), "usage_total": (tokens, snap.usage_total)}
        for what, (from_log, from_snapshot) in facts.items():
            if from_log != from_snapshot:
                problems.append(f"{rid}/{snap.id}: {what} is {from_snapshot!r} in the snapshot but "
                                f"{from_log!r} by the events")
    return problems


def check_requests(rid: str, stored: list[Event], snapshots: list[HandleSnapshot], lanes: list[Lane],
                   ) -> list[str]:
    """Every request that went pending is answered or still pending; none a lane saw is unknown."""
    asked = {e.pending.id for e in stored if e.type == "pending" and e.pending is not None}
    answered = {str((e.data or {}).get("request_id")) for e in stored if e.type == "resumed"}
    waiting = {s.pending.id for s in snapshots if s.state == "suspended" and s.pending is not None}
    problems = [f"{rid}: request {r} was lost: neither answered nor pending" for r in sorted(
        asked - answered - waiting)]
    seen = {r for lane in lanes for c in lane.cycles for r in c.requests}
    problems += [f"{rid}: request {r} reached a lane but has no pending event" for r in sorted(seen - asked)]
    return problems
