"""The inspector's sessions: server-side, random ids, a bounded count, expiring.

A person proves the daemon's token once (the login page); the session id then travels in an
HttpOnly, SameSite=Strict cookie. Each session has its own CSRF token (sent back in a hidden field
of every form) and the runtime keys the person added to it. Only a digest of the session id is
kept, so a memory dump shows no cookie that works. At ``MAX_SESSIONS`` the least recently used
session is dropped; a session unused for ``IDLE_S`` or older than ``MAX_AGE_S`` has ended.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

MAX_SESSIONS = 1000
IDLE_S = 8 * 3600.0
MAX_AGE_S = 24 * 3600.0
# runtime keys one session may hold
MAX_KEYS = 64
MAX_KEY_CHARS = 1024
# live timelines one session may have open at once (each holds a connection)
MAX_STREAMS = 8


def key_digest(secret: str) -> str:
    """A runtime key as runtime records store it."""
    return hashlib.sha256(secret.encode()).hexdigest()


@dataclass
class Session:
    csrf: str
    created: float
    used: float
    # runtime key digest -> the key (kept: a forwarded answer presents it to the owning daemon)
    keys: dict[str, str] = field(default_factory=dict)
    # live timelines open now
    streams: int = 0

    def holds(self, digest: str) -> bool:
        return any(hmac.compare_digest(digest, mine) for mine in self.keys)

    def key_for(self, digest: str) -> str:
        return next((key for mine, key in self.keys.items() if hmac.compare_digest(digest, mine)), "")

    def add_key(self, key: str) -> None:
        if len(self.keys) >= MAX_KEYS:
            self.keys.pop(next(iter(self.keys)))
        self.keys[key_digest(key)] = key

    def csrf_ok(self, presented: str) -> bool:
        return bool(presented) and hmac.compare_digest(presented.encode(), self.csrf.encode())


class Sessions:
    def __init__(self, now: Callable[[], float], limit: int = MAX_SESSIONS) -> None:
        self._now = now
        self._limit = limit
        self._by_digest: OrderedDict[str, Session] = OrderedDict()

    def __len__(self) -> int:
        return len(self._by_digest)

    def create(self) -> tuple[str, Session]:
        """A new session and the id its cookie carries."""
        sid = secrets.token_urlsafe(32)
        now = self._now()
        while len(self._by_digest) >= self._limit:
            self._by_digest.popitem(last=False)
        session = Session(secrets.token_urlsafe(32), now, now)
        self._by_digest[_digest(sid)] = session
        return sid, session

    def get(self, sid: str) -> Session | None:
        """The live session of ``sid`` (its use noted), or None."""
        if not sid or len(sid) > 100:
            return None
        d = _digest(sid)
        session = self._by_digest.get(d)
        if session is None:
            return None
        now = self._now()
        if now - session.used > IDLE_S or now - session.created > MAX_AGE_S:
            del self._by_digest[d]
            return None
        session.used = now
        self._by_digest.move_to_end(d)
        return session

    def end(self, sid: str) -> None:
        self._by_digest.pop(_digest(sid), None)


def _digest(sid: str) -> str:
    return hashlib.sha256(sid.encode()).hexdigest()
