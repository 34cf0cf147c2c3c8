"""What the inspector shows: runtimes, one runtime's handles and events, the pending inbox. Every
list is a page (never a whole table), and only of runtimes the session may see: unprotected ones
and those whose key it holds.

The runtime list and the inbox are the engine's reads (``engine.verbs.inbox``, as ``ListRuntimes``
and ``ListPending`` serve them): from the store rather than the loaded runtimes, so in a cluster any
daemon shows every runtime of the shared database. Here they get the inspector's page sizes and
cursors. A runtime's events are a synchronous store read the routes make through ``Store.read`` (off
the event loop on PostgreSQL); its handle tree reads every handle record, on a thread.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from dataclasses import dataclass
from typing import Generic, TypeVar

from ...engine.verbs.inbox import Inbox, PendingItem, RuntimeSummary
from ...model import JSON, Event
from ...store.base import PendingQuery, PendingRow, Store
from .sessions import Session

T = TypeVar("T")

RUNTIMES_PAGE = 50
PENDING_PAGE = 50
EVENTS_PAGE = 100
# a runtime's handle tree shows at most this many handles
MAX_TREE = 1000


class BadCursor(ValueError):
    """A page cursor this inspector did not make."""


@dataclass(frozen=True)
class Page(Generic[T]):
    items: list[T]
    next_cursor: str = ""


async def runtimes(inbox: Inbox, session: Session, cursor: str) -> Page[RuntimeSummary]:
    after = _decode(cursor, "r") if cursor else ""
    if not isinstance(after, str):
        raise BadCursor("bad page cursor")
    page = await inbox.runtimes(after, RUNTIMES_PAGE, session.holds)
    return Page(page.items, _encode("r", page.next) if page.next else "")


async def pending(inbox: Inbox, session: Session, cursor: str,
                  runtime_id: str | None = None) -> Page[PendingItem]:
    """Open suspensions oldest first (of one runtime, or all), from the store's pending index."""
    after = _row(cursor) if cursor else None
    page = await inbox.pending(PendingQuery(runtime_id=runtime_id, after=after, limit=PENDING_PAGE),
                               session.holds)
    last = page.next
    return Page(page.items, _encode("p", [last.since, last.runtime_id, last.handle_id]) if last else "")


def handles(store: Store, runtime_id: str) -> tuple[list[JSON], bool]:
    """The runtime's handle records in tree order (parents before children), and whether the tree
    was cut at ``MAX_TREE``."""
    recs = store.handles(runtime_id)
    cut = len(recs) > MAX_TREE
    return sorted(recs[:MAX_TREE], key=lambda r: str(r.get("id") or "").split("/")), cut


@dataclass(frozen=True)
class EventPage:
    events: list[Event]
    after: int  # the page starts after this seq
    last_seq: int  # the runtime's last stored seq


def events(store: Store, runtime_id: str, after: int | None, before: int | None = None) -> EventPage:
    """A page of stored events: those after ``after``, or else the page that ends just before
    ``before``, or else the newest page."""
    last = store.last_seq(runtime_id)
    limit = EVENTS_PAGE
    if after is not None:
        start = max(0, min(after, last))
    elif before is not None:
        end = max(0, min(before - 1, last))
        start, limit = max(0, end - EVENTS_PAGE), max(1, min(EVENTS_PAGE, end))
    else:
        start = max(0, last - EVENTS_PAGE)
    # bounded by bytes too: a page of large events is not read whole
    page = store.events(runtime_id, start, limit, max_bytes=1 << 20)
    return EventPage(page, start, last)


def _encode(kind: str, value: object) -> str:
    return base64.urlsafe_b64encode(json.dumps([kind, value]).encode()).decode().rstrip("=")


def _decode(cursor: str, kind: str) -> object:
    try:
        found = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (binascii.Error, ValueError):
        raise BadCursor("bad page cursor") from None
    if not isinstance(found, list) or len(found) != 2 or found[0] != kind:
        raise BadCursor("bad page cursor")
    return found[1]


def _row(cursor: str) -> PendingRow:
    found = _decode(cursor, "p")
    if (not isinstance(found, list) or len(found) != 3 or not isinstance(found[0], (int, float))
            or not math.isfinite(found[0]) or not all(isinstance(x, str) and x for x in found[1:])):
        raise BadCursor("bad page cursor")
    return PendingRow(float(found[0]), str(found[1]), str(found[2]))
