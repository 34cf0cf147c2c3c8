"""Answer links (docs/protocol.md §10): the capability a suspension gets when it asks for one.

A link is ``<base>/a/<token>`` with a random 256-bit token. The store never sees the token:
the request entry keeps its sha256 digest (``RequestEntry.links``) and one row per link, keyed
by that digest, says which runtime, request and leaf handle it answers — written in the same
commit as the suspension, so the link works after a restart and, on PostgreSQL, from any daemon,
and finding it is one keyed read however many requests are stored. The rows live in the
``requests`` table under ``LINKS_RUNTIME``, an id no runtime can have (runtime ids are letters,
digits, ``.``, ``_`` and ``-``), so no store needed a new table.

The token itself exists only in the ``Request.answer_url`` the engine announces live
(``Request.to_json`` leaves it out).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...model import JSON, AgentDef, RuntimeOptions

if TYPE_CHECKING:
    from ...store.base import Store

LINKS_RUNTIME = "~answer-links"
PATH_PREFIX = "/a/"
TOKEN_BYTES = 32
# longer than any token minted (43 characters): refused before any work
MAX_TOKEN_CHARS = 128


def digest(token: str) -> str:
    """The stored form of a token (sha256 hex): a leaked store does not answer anything."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class LinkRow:
    """What a link answers: its row in the store, keyed by the token's digest."""

    runtime: str
    request: str
    handle: str

    def to_json(self) -> JSON:
        return {"runtime": self.runtime, "request": self.request, "handle": self.handle}

    @classmethod
    def from_json(cls, d: JSON) -> LinkRow:
        return cls(str(d.get("runtime") or ""), str(d.get("request") or ""), str(d.get("handle") or ""))


@dataclass(frozen=True)
class Minted:
    url: str
    digest: str


def mint(base: str) -> Minted:
    """A fresh link under ``base`` (no trailing slash) and the digest to store for it."""
    token = secrets.token_urlsafe(TOKEN_BYTES)
    return Minted(f"{base}{PATH_PREFIX}{token}", digest(token))


def asks_for_link(agent: AgentDef, options: RuntimeOptions, tool: str) -> bool:
    """Whether a suspension of ``agent`` in a call of ``tool`` gets a link: the tool, the agent or
    the runtime ``options`` ask for it."""
    if agent.answer_link or options.answer_link:
        return True
    return any(t.name == tool and t.answer_link for t in agent.tools)


def any_asks(agents: list[AgentDef], options: RuntimeOptions) -> bool:
    """Whether a registry asks for links anywhere (the daemon must then serve them)."""
    return options.answer_link or any(a.answer_link or any(t.answer_link for t in a.tools) for a in agents)


def opens(store: Store, token: str, runtime: str, request: str, handle: str) -> bool:
    """Whether ``token`` is a link minted for exactly this runtime, request and handle (what lets
    an answer forwarded between daemons of a cluster stand in for the runtime key)."""
    if not token or len(token) > MAX_TOKEN_CHARS:
        return False
    wanted = digest(token)
    raw = store.get_request(LINKS_RUNTIME, wanted)
    if raw is None or LinkRow.from_json(raw) != LinkRow(runtime, request, handle):
        return False
    entry = store.get_request(runtime, request)
    return entry is not None and any(hmac.compare_digest(wanted, str(d)) for d in entry.get("links") or [])
