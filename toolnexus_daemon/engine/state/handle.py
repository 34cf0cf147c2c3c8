"""A handle: the durable record of one agent instance plus its in-memory companions.

``Handle`` is what the store keeps (``to_json``); its waiters and escalation lock live beside
it in ``live`` (``live.Live``, their one owner) and are never persisted. The conversation log of a handle
is stored per message: ``committed_len`` messages are its committed transcript,
the messages from there to ``log_len`` belong to the open turn (uncommitted
until the turn completes; dropped if it is abandoned).

Child ids are not part of the record: they are an append-only list kept under
``children_log(id)`` (one entry per spawn), so spawning under a parent with
100,000 children writes one small entry, not the whole list again. A handle
read back from the store reads that list only when ``children`` is first
used (List, Snapshot, closing a tree, a task parent's reattachment), so a
start or a spawn under a root with 100,000 children never reads it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields

from ...model import JSON, Budget, HandleState, InboxItem, Request, Status, TaskResult, Usage
from .checkpoint import Checkpoint
from .live import Live


@dataclass(eq=False)
class Handle:
    id: str
    agent: str
    parent: str | None
    depth: int
    state: HandleState = HandleState.IDLE
    task_key: str = ""
    last_result: TaskResult | None = None
    usage: Usage = field(default_factory=Usage)
    own_usage: Usage = field(default_factory=Usage)
    turns_total: int = 0
    pending: Request | None = None
    inbox: list[InboxItem] = field(default_factory=list)
    spawn_count: int = 0
    committed_len: int = 0
    log_len: int = 0
    budget: Budget = field(default_factory=Budget)
    spawned_at: float = 0.0
    # tool calls dispatched by this handle and its subtree (the maxToolCalls pool)
    tool_calls: int = 0
    # wakes of children waiting for a running-child slot, FIFO: [child id, prompt]
    wake_queue: list[list[str]] = field(default_factory=list)
    # the caller's trace context of a queued wake, by child id (engine.tracing; kept apart from
    # ``wake_queue`` so records stay readable by daemons that know no tracing)
    wake_traces: dict[str, str] = field(default_factory=dict)
    # suspended inline while an interpreter answers; recovery turns it back into running
    escalating: bool = False
    # when the current durable suspension began (seconds since the epoch; 0 = not suspended)
    suspended_at: float = 0.0
    # the registry version this handle runs (``versions``); 0 = the runtime's latest (not yet pinned)
    version: int = 0
    # kept in its own table, loaded with the handle
    cp: Checkpoint | None = field(default=None, repr=False)
    # child ids in spawn order once read (None: not yet); see ``children``
    child_ids: list[str] | None = field(default=None, repr=False)
    # reads the stored children log; set when the handle is read back from the store
    read_children: Callable[[], list[str]] | None = field(default=None, repr=False)
    # children added since this object was read, before ``children`` was first used
    unread_children: list[str] = field(default_factory=list, repr=False)
    # not persisted: the waiters and the escalation lock, with their one owner
    live: Live = field(default_factory=Live, repr=False)

    def to_json(self) -> JSON:
        return {
            "id": self.id, "agent": self.agent, "parent": self.parent, "depth": self.depth,
            "state": str(self.state), "task_key": self.task_key,
            "last_result": self.last_result.to_json() if self.last_result else None,
            "usage": self.usage.to_json(), "own_usage": self.own_usage.to_json(),
            "turns_total": self.turns_total,
            "pending": self.pending.to_json() if self.pending else None,
            "inbox": [i.to_json() for i in self.inbox], "spawn_count": self.spawn_count,
            "committed_len": self.committed_len, "log_len": self.log_len,
            "budget": self.budget.to_json(), "spawned_at": self.spawned_at,
            "tool_calls": self.tool_calls, "wake_queue": [list(q) for q in self.wake_queue],
            "escalating": self.escalating, "suspended_at": self.suspended_at,
            **({"wake_traces": dict(self.wake_traces)} if self.wake_traces else {}),
            "version": self.version,
        }

    @classmethod
    def from_json(cls, d: JSON) -> Handle:
        return cls(
            id=d["id"], agent=d.get("agent") or "", parent=d.get("parent"), depth=int(d.get("depth") or 0),
            state=HandleState(d["state"]),
            task_key=d.get("task_key") or "",
            last_result=TaskResult.from_json(d["last_result"]) if d.get("last_result") else None,
            usage=Usage.from_json(d.get("usage")), own_usage=Usage.from_json(d.get("own_usage")),
            turns_total=int(d.get("turns_total") or 0),
            pending=Request.from_json(d["pending"]) if d.get("pending") else None,
            inbox=[InboxItem.from_json(i) for i in d.get("inbox") or []],
            spawn_count=int(d.get("spawn_count") or 0), committed_len=int(d.get("committed_len") or 0),
            log_len=int(d.get("log_len") or 0), budget=Budget.from_json(d.get("budget")),
            spawned_at=float(d.get("spawned_at") or 0.0), tool_calls=int(d.get("tool_calls") or 0),
            wake_queue=[list(q) for q in d.get("wake_queue") or []], escalating=bool(d.get("escalating")),
            suspended_at=float(d.get("suspended_at") or 0.0),
            wake_traces={str(k): str(v) for k, v in (d.get("wake_traces") or {}).items()},
            # a handle stored before versions runs the registry its runtime had then: version 1
            version=int(d.get("version") or 1),
        )

    @property
    def children(self) -> list[str]:
        """Child ids in spawn order (read from the store's children log on first use)."""
        if self.child_ids is None:
            self.take_stored_children(self.read_children() if self.read_children is not None else [])
        assert self.child_ids is not None
        return self.child_ids

    @property
    def children_read(self) -> bool:
        """Whether ``children`` answers from memory (no store read)."""
        return self.child_ids is not None or self.read_children is None

    def take_stored_children(self, stored: list[str]) -> None:
        """The stored children log, read elsewhere (``HandleTable.walk``: off the event loop),
        merged with the spawns recorded since this object was read."""
        known = set(stored)
        self.child_ids = stored + [c for c in self.unread_children if c not in known]
        self.unread_children = []

    def add_child(self, child_id: str) -> None:
        """Record a spawn without reading the stored list when it has not been read yet."""
        if self.child_ids is None and self.read_children is not None:
            self.unread_children.append(child_id)
        else:
            self.children.append(child_id)

    def restore_from(self, fresh: Handle) -> None:
        """Take every persisted field (and the checkpoint) of ``fresh``; the live state stays."""
        for f in fields(self):
            if f.name != "live":
                setattr(self, f.name, getattr(fresh, f.name))

    def result(self, status: Status, text: str, *, is_error: bool | None = None,
               pending: Request | None = None, limit: str | None = None) -> TaskResult:
        """A TaskResult carrying this handle's cumulative turns and tree tokens."""
        err = status not in (Status.DONE, Status.PENDING) if is_error is None else is_error
        return TaskResult(status=status, text=text, is_error=err, pending=pending,
                          turns=self.turns_total, total_tokens=self.usage.total_tokens, limit=limit,
                          usage_estimated=self.usage.estimated)


def children_log(handle_id: str) -> str:
    """Where a handle's child ids are appended; ``#`` never occurs in a handle id."""
    return handle_id + "#children"


def storable_id(text: str) -> bool:
    """Whether an id can name a stored record at all (no NUL, at most 250 bytes); others are unknown."""
    return "\x00" not in text and len(text.encode()) <= 250
