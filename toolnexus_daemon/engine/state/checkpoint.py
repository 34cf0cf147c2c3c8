"""The step checkpoint of a handle's open turn (docs/protocol.md §1 point 1, §4 Resume).

A checkpoint exists while a turn is open (``running`` or ``suspended``). It
records where the turn stands: its input, how many model round trips it has
made, and — once the model asked for tools — the step: the model's message
(by log index), each call with its stable ``call_id``, and every result
received so far. Resume and crash recovery continue from it; nothing is asked
of the model twice and no completed call runs again.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass, field

from ...model import JSON, Answer, InboxItem, ToolResult
from ..definitions.fingerprint import Fingerprint

# the request kind asking whether a call of an ``on_crash: "ask"`` tool completed (§11)
RECONCILE = "reconcile"
# random bytes of a turn's tag: 48 bits, so two wakes of one handle never share call ids
TAG_BYTES = 6


def new_tag() -> str:
    """A fresh turn tag (12 hex digits), drawn once per wake and kept in its checkpoint."""
    return "t" + secrets.token_hex(TAG_BYTES)


def call_base(runtime_id: str, handle_id: str, tag: str) -> str:
    """What every ``call_id`` of one turn starts with: ``<runtime>/<handle>/<tag>``.

    The tag makes the ids of a turn differ from those of every other turn of the handle — one
    that failed or was interrupted before recording anything, or one of a runtime purged and
    created again under the same id — so a worker that deduplicates on ``call_id`` never answers
    a new call with an old outcome, while a redelivery of the same call (from the checkpoint,
    after a lost worker or a restart) keeps its id. Checkpoints written before tags existed have
    none and keep the ids they had."""
    return f"{runtime_id}/{handle_id}/{tag}" if tag else f"{runtime_id}/{handle_id}"


@dataclass
class Call:
    tool_call_id: str  # the model's own id (models reuse them; never a routing key)
    name: str
    arguments: JSON
    call_id: str  # unique in the daemon, stable across redelivery
    raw_arguments: str = ""  # the model's text when it was not valid JSON (its start)
    invalid: str = ""  # why the arguments are not a usable JSON object: the call is not run

    def to_json(self) -> JSON:
        d: JSON = {"tool_call_id": self.tool_call_id, "name": self.name, "arguments": self.arguments,
                   "call_id": self.call_id}
        if self.raw_arguments:
            d["raw_arguments"] = self.raw_arguments
        if self.invalid:
            d["invalid"] = self.invalid
        return d

    @classmethod
    def from_json(cls, d: JSON) -> Call:
        return cls(d["tool_call_id"], d["name"], d.get("arguments") or {}, d["call_id"],
                   d.get("raw_arguments") or "", d.get("invalid") or "")


@dataclass
class Step:
    number: int  # the handle's turns_total when the model asked for these calls
    assistant_index: int
    calls: list[Call]
    results: dict[int, ToolResult] = field(default_factory=dict)
    attempts: dict[int, int] = field(default_factory=dict)
    pending_idx: int | None = None
    # durable suspensions in a row of each call (chained approvals: manager, then director)
    chained: dict[int, int] = field(default_factory=dict)
    # calls of "ask" tools handed to a worker or service with no result recorded since (§11)
    inflight: set[int] = field(default_factory=set)
    # how many ``reconcile`` questions each call has had (each gets its own request id)
    reconciles: dict[int, int] = field(default_factory=dict)
    # the tag of the turn that opened the step (its checkpoint's; see ``call_base``)
    tag: str = ""

    def call_id(self, base: str, idx: int) -> str:
        """Call ``idx``'s id for ``base`` = ``<runtime>/<handle>``: the step's tag, number, index
        and — for a call run again after an answer — its attempt."""
        attempt = self.attempts.get(idx, 0)
        tagged = f"{base}/{self.tag}" if self.tag else base
        return f"{tagged}/s{self.number}c{idx}" + (f"a{attempt}" if attempt else "")

    def open_calls(self) -> list[int]:
        """Calls with no result yet, or whose last result suspended (they run again)."""
        return [i for i in range(len(self.calls))
                if i not in self.results or self.results[i].pending is not None]

    def reruns(self) -> list[int]:
        """Calls that ran and suspended: an applied answer runs them again, as new attempts
        (not a ``reconcile``: that one is answered in the daemon, or re-sent with its call_id)."""
        return [i for i in self.open_calls() if i in self.results and not self.reconciling(i)]

    def reconciling(self, i: int) -> bool:
        """Whether call ``i`` waits on a ``reconcile`` question (not one its tool asked)."""
        result = self.results.get(i)
        return (result is not None and result.pending is not None and i in self.reconciles
                and result.pending.id == reconcile_id(self.calls[i].call_id, self.reconciles[i]))

    def first_pending(self) -> int | None:
        for i in range(len(self.calls)):
            result = self.results.get(i)
            if result is not None and result.pending is not None:
                return i
        return None

    def to_json(self) -> JSON:
        return {"number": self.number, "assistant_index": self.assistant_index,
                "calls": [c.to_json() for c in self.calls],
                "results": {str(i): r.to_json() for i, r in self.results.items()},
                "attempts": {str(i): n for i, n in self.attempts.items()},
                "pending_idx": self.pending_idx,
                **({"chained": {str(i): n for i, n in self.chained.items()}} if self.chained else {}),
                **({"inflight": sorted(self.inflight)} if self.inflight else {}),
                **({"reconciles": {str(i): n for i, n in self.reconciles.items()}}
                   if self.reconciles else {}),
                **({"tag": self.tag} if self.tag else {})}

    @classmethod
    def from_json(cls, d: JSON) -> Step:
        return cls(number=int(d["number"]), assistant_index=int(d["assistant_index"]),
                   calls=[Call.from_json(c) for c in d["calls"]],
                   results={int(i): ToolResult.from_json(r) for i, r in (d.get("results") or {}).items()},
                   attempts={int(i): int(n) for i, n in (d.get("attempts") or {}).items()},
                   pending_idx=d.get("pending_idx"),
                   chained={int(i): int(n) for i, n in (d.get("chained") or {}).items()},
                   inflight={int(i) for i in d.get("inflight") or []},
                   reconciles={int(i): int(n) for i, n in (d.get("reconciles") or {}).items()},
                   tag=str(d.get("tag") or ""))


@dataclass
class Checkpoint:
    input: str
    turn_start: int  # log index of this turn's user message
    drained: list[InboxItem] = field(default_factory=list)
    turns: int = 0  # model round trips in this wake
    tokens: int = 0  # tokens spent by this wake
    step: Step | None = None
    answer: Answer | None = None  # an accepted Answer not yet applied to step.pending_idx
    # the calls that answer re-runs already have their new call_ids (given by the acceptance's commit)
    reinvoke_announced: bool = False
    # what the pending answer will be fed to, recorded by a durable suspension (docs/protocol.md §11)
    fingerprint: Fingerprint | None = None
    # this turn's part of every call_id (``call_base``); "" in checkpoints older than tags
    tag: str = field(default_factory=new_tag)
    # the turn's trace context as W3C traceparents (``spans``): the parent its spans hang under
    # and its last span (the one that suspended); "" when no trace is kept
    trace_parent: str = ""
    trace_span: str = ""

    def to_json(self) -> JSON:
        return {"input": self.input, "turn_start": self.turn_start,
                "drained": [i.to_json() for i in self.drained], "turns": self.turns,
                "tokens": self.tokens, "step": self.step.to_json() if self.step else None,
                "answer": self.answer.to_json() if self.answer else None,
                **({"reinvoke_announced": True} if self.reinvoke_announced else {}),
                **({"fingerprint": self.fingerprint.to_json()} if self.fingerprint else {}),
                **({"tag": self.tag} if self.tag else {}),
                **({"trace": {"parent": self.trace_parent, "span": self.trace_span}}
                   if self.trace_parent or self.trace_span else {})}

    @classmethod
    def from_json(cls, d: JSON) -> Checkpoint:
        trace = d.get("trace")
        trace = trace if isinstance(trace, dict) else {}
        return cls(input=d.get("input") or "", turn_start=int(d["turn_start"]),
                   drained=[InboxItem.from_json(i) for i in d.get("drained") or []],
                   turns=int(d.get("turns") or 0), tokens=int(d.get("tokens") or 0),
                   step=Step.from_json(d["step"]) if d.get("step") else None,
                   answer=Answer.from_json(d["answer"]) if d.get("answer") else None,
                   reinvoke_announced=bool(d.get("reinvoke_announced")),
                   fingerprint=Fingerprint.from_json(d["fingerprint"]) if d.get("fingerprint") else None,
                   tag=str(d.get("tag") or ""), trace_parent=str(trace.get("parent") or ""),
                   trace_span=str(trace.get("span") or ""))


def reconcile_id(call_id: str, round_: int) -> str:
    """The id of round ``round_`` of the ``reconcile`` question about ``call_id``."""
    return request_id_for(f"{call_id}/reconcile{round_}")


def request_id_for(call_base: str) -> str:
    """The id given to a suspension that named none: stable across re-invocations of
    the same call, so a repeated suspension is recognised as the same request."""
    return "req-" + hashlib.sha1(call_base.encode()).hexdigest()[:16]
