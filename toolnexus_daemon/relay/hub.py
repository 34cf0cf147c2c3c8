"""The worker hub: routes tool, model and resolve calls to the app's connected workers.

It knows nothing of gRPC: calls and replies are the typed messages of
``relay.messages``. The Connect servicer attaches a ``WorkerSession`` per
stream, drains its ``outbox`` onto the wire and hands replies back through
``deliver``. A call whose worker disconnects goes back to the queue and is
re-sent, with the same ``call_id``, to another worker or to the next one that
connects (docs/protocol.md §6) — unless the caller said it must not be sent twice (a tool
with ``on_crash: "ask"``, §11): then it fails with ``WorkerLost``. A call that no worker
takes within its ``take_timeout`` fails with ``NoWorker``; one given a ``reply_timeout`` whose
holder stays silent that long fails with ``NoReply`` naming the holder, so the caller can send
it again (same ``call_id``) to another worker.

Only the worker holding a call may answer it: a reply from any other stream of the runtime —
a guessed id, or a late reply from a worker the call was taken from — is refused (``deliver``).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from .messages import Incoming, ModelCallOut, Outgoing, ToolCallOut

log = logging.getLogger("toolnexus_daemon.relay")


class NoWorker(Exception):
    """No connected worker took the call in time."""


class WorkerLost(Exception):
    """The worker that took a call not to be re-sent disconnected before replying."""


class NoReply(Exception):
    """The worker holding a call did not reply within the call's ``reply_timeout``."""

    def __init__(self, kind: str, session: WorkerSession) -> None:
        super().__init__(kind)
        self.session = session


@dataclass(eq=False)
class WorkerSession:
    runtime_id: str
    worker_id: str
    tools: frozenset[str] = frozenset()
    llm: bool = False
    resolver: bool = False
    # said "no native tools" (an empty ``tools`` alone means every native tool)
    no_tools: bool = False
    # the registry versions whose native tools it serves; empty = the runtime's latest
    versions: frozenset[int] = frozenset()
    outbox: asyncio.Queue[Outgoing | None] = field(default_factory=asyncio.Queue)
    inflight: set[str] = field(default_factory=set)

    def can_serve(self, out: Outgoing) -> bool:
        if isinstance(out, ToolCallOut):
            if self.no_tools or not (out.version in self.versions if self.versions else out.latest):
                return False
            return not self.tools or out.tool in self.tools
        if isinstance(out, ModelCallOut):
            return self.llm
        return self.resolver


@dataclass(eq=False)
class _PendingCall:
    out: Outgoing
    runtime_id: str
    reply: asyncio.Future[Incoming]
    assigned: WorkerSession | None = None
    taken: asyncio.Event = field(default_factory=asyncio.Event)
    # set when the worker holding the call goes away; cleared once the caller has seen it
    lost: bool = False
    # what the caller awaits while the call is out: done on a reply or on the worker's loss
    # (a plain future: a task waiting on an Event, raced against the reply, cost more per call)
    wake: asyncio.Future[None] | None = None
    # False: a worker that took the call and vanished may have acted; the call is not re-sent
    resend: bool = True
    # workers passed over while any other capable one is connected (they let this call time out)
    avoid: frozenset[WorkerSession] = frozenset()


class WorkerHub:
    """All worker sessions of the daemon, grouped by runtime."""

    def __init__(self) -> None:
        self._sessions: dict[str, list[WorkerSession]] = {}
        self._calls: dict[str, _PendingCall] = {}
        self._rr = itertools.count()
        self.on_change: Callable[[], None] | None = None

    def sessions(self, runtime_id: str) -> list[WorkerSession]:
        return list(self._sessions.get(runtime_id, ()))

    def has_resolver(self, runtime_id: str) -> bool:
        return any(s.resolver for s in self._sessions.get(runtime_id, ()))

    def versions_waiting(self, runtime_id: str) -> list[int]:
        """The registry versions of native calls of ``runtime_id`` no connected worker took: a
        version no worker serves (Info and ListRuntimes show them)."""
        return sorted({c.out.version for c in self._calls.values() if c.runtime_id == runtime_id
                       and c.assigned is None and isinstance(c.out, ToolCallOut)})

    def count(self) -> int:
        return sum(len(v) for v in self._sessions.values())

    def attach(self, session: WorkerSession) -> None:
        self._sessions.setdefault(session.runtime_id, []).append(session)
        for call in list(self._calls.values()):
            if call.assigned is None and call.runtime_id == session.runtime_id:
                self._assign(call)

    def detach(self, session: WorkerSession) -> None:
        """Forget a session; its unanswered calls go to another worker or wait for one."""
        group = self._sessions.get(session.runtime_id, [])
        if session in group:
            group.remove(session)
        if not group:
            self._sessions.pop(session.runtime_id, None)
        for call_id in list(session.inflight):
            call = self._calls.get(call_id)
            if call is not None and call.assigned is session:
                call.assigned = None
                call.taken.clear()
                call.lost = True
                _wake(call)
                if call.resend:
                    self._assign(call)
        session.inflight.clear()
        session.outbox.put_nowait(None)

    def detach_runtime(self, runtime_id: str) -> None:
        for session in self.sessions(runtime_id):
            self.detach(session)

    async def call(self, runtime_id: str, out: Outgoing, take_timeout: float, *, resend: bool = True,
                   reply_timeout: float | None = None, avoid: frozenset[WorkerSession] = frozenset(),
                   ) -> Incoming:
        """Send ``out`` to a capable worker and return its reply (of whatever kind the worker sent).

        Waits at most ``take_timeout`` seconds for a worker to take the call
        (again after each disconnect, or — with ``resend=False`` — raises ``WorkerLost``
        at the first); once taken, waits for the reply — at most ``reply_timeout`` seconds per
        holder when given, then raises ``NoReply``. Workers in ``avoid`` get the call only when
        no other capable worker is connected.
        """
        loop = asyncio.get_running_loop()
        call = _PendingCall(out=out, runtime_id=runtime_id, reply=loop.create_future(), resend=resend,
                            avoid=avoid)
        self._calls[out.call_id] = call
        try:
            self._assign(call)
            if call.assigned is None and isinstance(out, ToolCallOut) and not out.latest:
                # announced here and in Info / ListRuntimes (``versions_waiting``) until one connects
                log.warning("a native call waits for a worker serving its registry version", extra={
                    "runtime": runtime_id, "tool": out.tool, "version": out.version, "handle": out.handle})
            while not call.reply.done():
                await self._await_taken(call, take_timeout)
                if not call.lost and not call.reply.done():
                    await self._await_reply(call, loop.create_future(), reply_timeout)
                if call.lost and not call.reply.done() and not call.resend:
                    raise WorkerLost(call.out.kind)
                call.lost = False
            return call.reply.result()
        finally:
            self._calls.pop(out.call_id, None)
            if call.assigned is not None:
                call.assigned.inflight.discard(out.call_id)

    def deliver(self, session: WorkerSession, reply: Incoming) -> bool:
        """A worker's reply. False if ``session`` holds no call waiting on ``reply.call_id``: the
        id is unknown, already answered or timed out, or the call is held by another worker."""
        call_id = reply.call_id
        call = self._calls.get(call_id)
        if call is None or call.reply.done() or call.assigned is not session:
            return False
        session.inflight.discard(call_id)
        call.reply.set_result(reply)
        _wake(call)
        return True

    @staticmethod
    async def _await_reply(call: _PendingCall, wake: asyncio.Future[None], reply_timeout: float | None,
                           ) -> None:
        """Wait until the holder replies or is lost; ``NoReply`` after ``reply_timeout`` seconds."""
        call.wake = wake
        holder = call.assigned
        try:
            await asyncio.wait_for(wake, reply_timeout)
        except TimeoutError:
            if call.reply.done() or holder is None:
                return
            raise NoReply(call.out.kind, holder) from None
        finally:
            call.wake = None

    async def _await_taken(self, call: _PendingCall, take_timeout: float) -> None:
        if call.taken.is_set():
            return
        try:
            await asyncio.wait_for(call.taken.wait(), take_timeout)
        except TimeoutError:
            raise NoWorker(call.out.kind) from None

    def _assign(self, call: _PendingCall) -> None:
        capable = [s for s in self._sessions.get(call.runtime_id, ()) if s.can_serve(call.out)]
        capable = [s for s in capable if s not in call.avoid] or capable
        if not capable:
            return
        session = capable[next(self._rr) % len(capable)]
        call.assigned = session
        session.inflight.add(call.out.call_id)
        session.outbox.put_nowait(call.out)
        call.taken.set()


def _wake(call: _PendingCall) -> None:
    if call.wake is not None and not call.wake.done():
        call.wake.set_result(None)
