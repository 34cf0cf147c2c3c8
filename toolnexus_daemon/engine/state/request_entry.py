"""One entry of the request index and its typed wait states (a leaf: ``change`` and
``request_index`` both use it, neither imports the other back)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from ...model import JSON, Answer, Request


class WaitState(StrEnum):
    PENDING = "pending"
    ANSWERED = "answered"
    EXPIRED = "expired"  # answered by its deadline, or too late: a decline with reason "expired"
    CANCELLED = "cancelled"


@dataclass(frozen=True)
class Wait:
    """One leaf handle's wait on a request."""

    state: WaitState
    answer: Answer | None = None
    top: str = ""  # the top-most handle the answer's cascade reached

    def to_json(self) -> JSON:
        d: JSON = {"state": str(self.state)}
        if self.answer is not None:
            d["answer"] = self.answer.to_json()
        if self.top:
            d["top"] = self.top
        return d

    @classmethod
    def from_json(cls, d: JSON) -> Wait:
        answer = d.get("answer")
        return cls(WaitState(d.get("state") or "pending"), Answer.from_json(answer) if answer else None,
                   str(d.get("top") or ""))


@dataclass
class RequestEntry:
    """A request (as announced) and the waits on it, by handle id."""

    request: JSON
    waits: dict[str, Wait] = field(default_factory=dict)
    # sha256 digests of the answer links minted for it (``state.answer_links``); never the tokens
    links: list[str] = field(default_factory=list)

    @classmethod
    def opened(cls, request: Request, handle: str) -> RequestEntry:
        return cls(request.to_json(), {handle: Wait(WaitState.PENDING)})

    def pending(self) -> list[str]:
        return [hid for hid, w in self.waits.items() if w.state is WaitState.PENDING]

    def settled(self) -> bool:
        """Whether any wait was answered or cancelled: the id is used up."""
        return any(w.state is not WaitState.PENDING for w in self.waits.values())

    def to_json(self) -> JSON:
        d: JSON = {"request": self.request, "handles": {hid: w.to_json() for hid, w in self.waits.items()}}
        if self.links:
            d["links"] = list(self.links)
        return d

    @classmethod
    def from_json(cls, d: JSON) -> RequestEntry:
        return cls(dict(d.get("request") or {}),
                   {hid: Wait.from_json(w) for hid, w in dict(d.get("handles") or {}).items()},
                   [str(x) for x in d.get("links") or []])
