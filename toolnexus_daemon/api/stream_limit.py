"""How many watch streams (Watch, WatchPending) one caller may hold open at once.

A watch stream costs the daemon memory for as long as it is open (what is
being written to it, bounded by bytes per stream), so the number of streams
is bounded too: per caller, where a caller is the peer's host (the address
without its port — one process opening many connections is still one caller;
every unix-socket client is one) together with the bearer token it presents.
The stream past the limit is refused with RESOURCE_EXHAUSTED naming the limit
and the flag that sets it; a stream gives its place back as soon as it ends.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator
from typing import TypeVar

from grpc import aio

from ..errors import ResourceExhausted

FLAG = "--max-watch-streams-per-caller"
Req = TypeVar("Req")  # any RPC's context: only its peer and metadata are read
Resp = TypeVar("Resp")


def caller_of(context: aio.ServicerContext[Req, Resp]) -> str:
    """The caller a stream counts against: peer host and a digest of its bearer token."""
    peer = str(context.peer() or "")
    kind, _, address = peer.partition(":")
    host = address.rpartition(":")[0] if kind in ("ipv4", "ipv6") else kind
    token = next((v for k, v in context.invocation_metadata() or () if k == "authorization"), "")
    raw = token.encode() if isinstance(token, str) else bytes(token)
    return f"{host}|{hashlib.sha256(raw).hexdigest()[:16] if raw else ''}"


class StreamLimit:
    """Open watch streams per caller, at most ``per_caller`` each."""

    def __init__(self, per_caller: int) -> None:
        self.per_caller = per_caller
        self._open: dict[str, int] = {}

    def count(self, caller: str) -> int:
        return self._open.get(caller, 0)

    @contextlib.contextmanager
    def hold(self, context: aio.ServicerContext[Req, Resp], method: str) -> Iterator[None]:
        """A place for one stream of the caller of ``context`` while the block runs; RESOURCE_EXHAUSTED
        when the caller holds the limit already."""
        caller = caller_of(context)
        held = self._open.get(caller, 0)
        if held >= self.per_caller:
            raise ResourceExhausted(
                f"{method}: this caller already holds {held} watch streams (Watch and WatchPending), "
                f"the most one caller may hold open ({FLAG} {self.per_caller}, "
                f"env TOOLNEXUS_MAX_WATCH_STREAMS_PER_CALLER); end one, or ask the operator to raise it")
        self._open[caller] = held + 1
        try:
            yield
        finally:
            left = self._open[caller] - 1
            if left:
                self._open[caller] = left
            else:
                del self._open[caller]
