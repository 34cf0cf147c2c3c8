"""What a link token opens, and answering through it (docs/protocol.md §10).

A token is looked up by its digest: one keyed read of the link row, one of the request entry.
An unknown token costs the same two reads and one constant-time comparison as a known one, so
timing tells nothing about which tokens exist. The entry's own list of digests is checked too
(``hmac.compare_digest``), so a stray row cannot open a request that never minted it.

Answering goes through ``Runtime.resume`` — the path gRPC ``Resume`` takes, with its single-use
and duplicate rules — without the runtime key: the link is the capability.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from enum import StrEnum

from ..clock import Clock, parse_rfc3339
from ..engine.commit.ownership import Moved
from ..engine.state.answer_links import LINKS_RUNTIME, MAX_TOKEN_CHARS, LinkRow, digest
from ..engine.state.request_entry import RequestEntry, WaitState
from ..engine.verbs.engine import Engine
from ..errors import (
    AlreadyAnswered,
    DaemonError,
    DataLoss,
    DefinitionChanged,
    FailedPrecondition,
    NotFound,
    Unavailable,
)
from ..model import Answer, Request

_DUMMY = digest("no link has this token")
_EXPIRED = "expired"


class LinkState(StrEnum):
    PENDING = "pending"
    ANSWERED = "answered"
    CANCELLED = "cancelled"
    EXPIRED = "expired"
    GONE = "gone"  # the runtime or its request no longer exists

    @property
    def open(self) -> bool:
        return self is LinkState.PENDING


@dataclass(frozen=True)
class Link:
    row: LinkRow
    request: Request
    state: LinkState
    answer: Answer | None = None
    # kept to vouch for a forwarded answer in a cluster; never shown or logged
    token: str = field(default="", repr=False)


@dataclass(frozen=True)
class Outcome:
    status: int  # the HTTP status the answer earns
    state: str  # "answered", "duplicate", or why not
    message: str
    handle: str = ""


# in a cluster: sends the answer to the daemon that owns the runtime, vouched for by the token;
# returns (top handle, duplicate) or raises the owner's refusal as a domain error
ForwardAnswer = Callable[[Moved, LinkRow, Answer, str], Awaitable[tuple[str, bool]]]


class Links:
    """Finds links and answers through them."""

    def __init__(self, engine: Engine, clock: Clock, forward: ForwardAnswer | None = None) -> None:
        self._engine = engine
        self._clock = clock
        self._forward = forward

    async def lookup(self, token: str) -> Link | None:
        """``find`` through ``Store.read``: off the event loop where the store's reads wait on a network."""
        return await self._engine.store.read(lambda _: self.find(token))

    def find(self, token: str) -> Link | None:
        """The link ``token`` opens, or None for a token no link has."""
        wanted = digest(token[:MAX_TOKEN_CHARS])
        store = self._engine.store
        raw = store.get_request(LINKS_RUNTIME, wanted if len(token) <= MAX_TOKEN_CHARS else _DUMMY)
        if raw is None:
            store.get_request(LINKS_RUNTIME, _DUMMY)  # the second read a known token costs
            hmac.compare_digest(wanted, _DUMMY)
            return None
        row = LinkRow.from_json(raw)
        rec = store.get_request(row.runtime, row.request)
        if rec is None:  # the runtime was purged: the token was real, the request is gone
            return Link(row, Request(row.request, "", ""), LinkState.GONE)
        entry = RequestEntry.from_json(rec)
        if not any(hmac.compare_digest(wanted, d) for d in entry.links):
            return None
        return replace(self._link(row, entry), token=token)

    def _link(self, row: LinkRow, entry: RequestEntry) -> Link:
        request = Request.from_json(entry.request)
        wait = entry.waits.get(row.handle)
        if wait is None or wait.state is WaitState.CANCELLED:
            return Link(row, request, LinkState.CANCELLED)
        if wait.state is WaitState.ANSWERED:
            answer = wait.answer
            late = answer is not None and not answer.ok and answer.reason == _EXPIRED
            return Link(row, request, LinkState.EXPIRED if late else LinkState.ANSWERED, answer)
        if self._expired(request):
            return Link(row, request, LinkState.EXPIRED)
        return Link(row, request, LinkState.PENDING)

    def _expired(self, request: Request) -> bool:
        deadline = parse_rfc3339(request.expires_at) if request.expires_at else None
        return deadline is not None and self._clock.now() > deadline

    async def answer(self, link: Link, answer: Answer) -> Outcome:
        """Answer what ``link`` opens; the outcome says how that went, as an HTTP status."""
        if link.state in (LinkState.CANCELLED, LinkState.EXPIRED, LinkState.GONE):
            return Outcome(410, str(link.state), _gone(link.state))
        try:
            handle, duplicate = await self._resume(link, answer)
        except (NotFound, DataLoss):
            return Outcome(410, str(LinkState.GONE), _gone(LinkState.GONE))
        except Moved as exc:  # in a cluster, with no forwarding: another daemon serves it
            return Outcome(503, "elsewhere", f"the request is served by daemon {exc.owner} of the cluster; "
                                             "open the link again in a moment")
        except DefinitionChanged as exc:
            # the answer was not taken: whoever runs the agent decides whether it still applies
            return Outcome(409, "definition_changed", "the agent's definition changed since this request "
                                                      f"was asked, so the answer was not delivered: {exc}")
        except AlreadyAnswered:
            return Outcome(409, "conflict", "this request was already answered differently; "
                                            "a different answer cannot replace it")
        except FailedPrecondition as exc:  # e.g. the daemon began to stop meanwhile: its own words
            return Outcome(409, "refused", str(exc))
        except DaemonError as exc:  # stopping, or the owner could not be reached: try again
            return Outcome(503, "unavailable", str(exc))
        if duplicate:
            return Outcome(200, "duplicate", "this answer was already given; nothing changed", handle)
        return Outcome(200, "answered", "thank you: the answer was delivered", handle)

    async def _resume(self, link: Link, answer: Answer) -> tuple[str, bool]:
        """Resume here, or (cluster) on the daemon that owns the runtime."""
        if self._engine.stopping:
            raise Unavailable("the daemon is shutting down; open the link again in a moment")
        try:
            rt = await self._engine.open(link.row.runtime)
        except Moved as moved:
            if self._forward is None:
                raise
            return await self._forward(moved, link.row, answer, link.token)
        out = await rt.resume(answer, link.row.handle, no_wait=True)
        return out.handle, out.duplicate


def _gone(state: LinkState) -> str:
    why = {LinkState.CANCELLED: "the request was cancelled (its handle was interrupted or closed)",
           LinkState.EXPIRED: "the request expired before it was answered",
           LinkState.GONE: "the runtime of this request no longer exists"}
    return f"this link can no longer be used: {why.get(state, 'it was used')}"
