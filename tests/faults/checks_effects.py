"""Checks on effects: tool executions (the ledger), model requests, and the committed transcripts.

A native tool call may run again only if it was in flight at a kill: once its
result was committed, no later daemon may dispatch it, and no daemon may
dispatch one call twice. A call of an ``on_crash="ask"`` tool may not run again
at all: in flight at a kill, it is asked about (``reconcile``), and the lanes
answer with an output or a decline — never "run it again". The same holds for model calls (a reply committed
is never paid for again). Transcripts must hold every message exactly once,
in the shape the loop writes: the wake's user message, then model messages
each followed by one tool message per call, in call order.
"""

from __future__ import annotations

import bisect
import json
from collections import Counter
from dataclasses import dataclass

from toolnexus_daemon.model import JSON, Event

from .agents import ASK_TOOLS, Ask, tool_calls_of
from .inspect_store import CommitTracker
from .ledger import Execution

# how long after a daemon's launch a request may still be a dead predecessor's, seen late
SETTLED_S = 2.0


@dataclass(frozen=True)
class EffectFigures:
    tool_calls: int
    executions: int
    reexecutions: int
    model_asks: int
    model_reasks: int
    ask_calls: int = 0  # distinct calls of on_crash="ask" tools
    ask_executions: int = 0
    reconciled: int = 0  # of them asked about after a kill (their results came from an answer)


def check_ledger(ledger: dict[str, list[Execution]], tracker: CommitTracker,
                 stored: dict[str, list[Event]], reconciled: frozenset[str] = frozenset()) -> list[str]:
    """``reconciled``: calls whose result an answer gave (one in flight at a kill may never have
    reached the worker: a result without a run is then what the person said)."""
    problems = []
    for call_id, runs in sorted(ledger.items()):
        gens = [r.gen for r in runs]
        streams = [(r.gen, r.stream) for r in runs]
        if len(set(streams)) != len(streams):
            problems.append(f"tool call {call_id} was sent twice on one worker stream "
                            f"(gen, stream: {streams})")
        done_at = tracker.tool_done_at.get(call_id)
        if done_at is not None and any(g > done_at for g in gens):
            problems.append(f"tool call {call_id} ran again (gens {gens}) after its result was committed "
                            f"before kill {done_at}")
    results = {str(e.data["call_id"]) for events in stored.values() for e in events
               if e.type == "tool_result" and e.data and e.data.get("tool") != "task"}
    called = {str(e.data["call_id"]) for events in stored.values() for e in events
              if e.type == "tool_call" and e.data}
    problems += [f"tool call {c} has a committed result but never ran"
                 for c in sorted(results - set(ledger) - reconciled)]
    problems += [f"tool call {c} ran but no tool_call event names it" for c in sorted(set(ledger) - called)]
    return problems


def check_ask_tools(ledger: dict[str, list[Execution]]) -> list[str]:
    """No call of an ``on_crash="ask"`` tool ran twice: a silent re-execution is a violation."""
    return [f"ask tool call {call_id} ({runs[0].tool}) ran {len(runs)} times (gens {[r.gen for r in runs]})"
            for call_id, runs in sorted(ledger.items()) if runs[0].tool in ASK_TOOLS and len(runs) > 1]


def check_model_asks(asks: list[Ask], handle_of: dict[str, tuple[str, str]], tracker: CommitTracker,
                     launches: list[float]) -> list[str]:
    """``handle_of`` maps a handle key to (runtime id, handle); ``launches`` are the daemon start times.

    A request is placed in the life of the last daemon launched before the script saw it. The
    script runs in this (busy) process, so a dead daemon's last request may be seen only after
    the next daemon was launched: two asks of one call count as one daemon asking twice only
    when both came ``SETTLED_S`` after its launch. A request whose reply got committed was seen
    before that commit, so it is never placed too late."""
    problems = []
    settled = [a for a in asks if a.at - launches[_generation(a.at, launches)] > SETTLED_S]
    per_life = Counter((a.handle_key, a.number, _generation(a.at, launches)) for a in settled)
    problems += [f"model call {n} of {k!r} was asked {c} times in the life of daemon {g}"
                 for (k, n, g), c in sorted(per_life.items()) if c > 1]
    for ask in asks:
        where = handle_of.get(ask.handle_key)
        if where is None:
            problems.append(f"model asked for unknown handle key {ask.handle_key!r}")
            continue
        done_at = tracker.model_done_at.get((*where, ask.number))
        gen = _generation(ask.at, launches)
        if done_at is not None and gen > done_at:
            problems.append(f"model call {ask.number} of {where[1]} was asked again by daemon {gen} "
                            f"although its reply was committed before kill {done_at}")
    return problems


def _generation(at: float, launches: list[float]) -> int:
    """The last daemon launched before ``at`` (0 = the first daemon)."""
    return max(0, bisect.bisect_right(launches, at) - 1)


def effect_figures(ledger: dict[str, list[Execution]], asks: list[Ask],
                   reconciled: frozenset[str] = frozenset()) -> EffectFigures:
    executions = sum(len(runs) for runs in ledger.values())
    distinct = Counter((a.handle_key, a.number) for a in asks)
    ask_runs = [runs for runs in ledger.values() if runs[0].tool in ASK_TOOLS]
    return EffectFigures(tool_calls=len(ledger), executions=executions, reexecutions=executions - len(ledger),
                         model_asks=len(asks), model_reasks=len(asks) - len(distinct),
                         ask_calls=len(ask_runs), ask_executions=sum(len(r) for r in ask_runs),
                         reconciled=len(reconciled))


def check_transcript(where: str, record: JSON, messages: list[JSON], tags: list[str]) -> list[str]:
    """One handle's committed transcript: complete, each message once, well formed, one turn per tag."""
    problems = []
    if not (len(messages) == record.get("log_len") == record.get("committed_len")):
        problems.append(f"{where}: {len(messages)} messages stored, log_len {record.get('log_len')}, "
                        f"committed_len {record.get('committed_len')}")
    dumped = Counter(json.dumps(m, sort_keys=True) for m in messages)
    problems += [f"{where}: message stored {n} times: {m[:120]}" for m, n in dumped.items() if n > 1]
    users = [str(m.get("content")) for m in messages if m.get("role") == "user"]
    if users != tags:
        problems.append(f"{where}: user messages {users} but the wakes were {tags}")
    problems += _shape_problems(where, messages)
    return problems


def _shape_problems(where: str, messages: list[JSON]) -> list[str]:
    i, expect_user = 0, True
    while i < len(messages):
        role = messages[i].get("role")
        if role == "user" and expect_user:
            i, expect_user = i + 1, False
            continue
        if role != "assistant" or expect_user:
            return [f"{where}: message {i} is {role!r} where the loop never writes one"]
        ids = [c[0] for c in tool_calls_of(messages[i])]
        answers = [m.get("tool_call_id") for m in messages[i + 1:i + 1 + len(ids)] if m.get("role") == "tool"]
        if answers != ids:
            return [f"{where}: model message {i} asked for {ids} but the tool messages answer {answers}"]
        i += 1 + len(ids)
        expect_user = not ids
    return [] if expect_user or not messages else [f"{where}: the last turn has no final model message"]
