"""One state change of a runtime: the records, messages and events that commit together.

The engine mutates handles in memory, describes what it touched in a
``Change``, and the committer turns it into one store ``Batch`` — handles are
serialised when the change is committed, events get their seqs when its transaction is written.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ...model import JSON, EventType, HandleState, Request, TaskResult
from .checkpoint import Checkpoint
from .handle import Handle

if TYPE_CHECKING:
    from .request_entry import RequestEntry


@dataclass
class EventSpec:
    handle: str
    type: EventType
    note: str = ""
    from_state: str = ""
    to_state: str = ""
    pending: Request | None = None
    result: TaskResult | None = None
    data: JSON | None = None


@dataclass
class Change:
    handles: dict[str, Handle] = field(default_factory=dict)
    messages: list[tuple[str, int, JSON]] = field(default_factory=list)
    truncate: list[tuple[str, int]] = field(default_factory=list)
    checkpoints: dict[str, Checkpoint | None] = field(default_factory=dict)
    requests: dict[str, RequestEntry] = field(default_factory=dict)
    # answer-link rows by token digest (``state.answer_links``), stored beside the request entries
    links: dict[str, JSON] = field(default_factory=dict)
    events: list[EventSpec] = field(default_factory=list)
    # registry versions by store key (``versions.key_of``); None deletes
    versions: dict[str, JSON | None] = field(default_factory=dict)
    runtime: bool = False
    # delete every record of the runtime (before this change's own writes, if any)
    purge: bool = False

    def save(self, *handles: Handle) -> Change:
        for h in handles:
            self.handles[h.id] = h
        return self

    def event(self, h: Handle, type_: EventType, note: str = "", *, pending: Request | None = None,
              result: TaskResult | None = None, data: JSON | None = None) -> Change:
        self.events.append(EventSpec(h.id, type_, note, pending=pending, result=result, data=data))
        return self

    def transition(self, h: Handle, from_state: HandleState, to_state: HandleState, note: str) -> Change:
        """A state change of ``h``, recorded as a ``transition`` event (the pinned state names)."""
        self.events.append(EventSpec(h.id, EventType.TRANSITION, note, from_state=str(from_state),
                                     to_state=str(to_state)))
        return self

    def message(self, h: Handle, index: int, message: JSON) -> Change:
        self.messages.append((h.id, index, message))
        return self

    def checkpoint(self, h: Handle, cp: Checkpoint | None) -> Change:
        self.checkpoints[h.id] = cp
        return self
