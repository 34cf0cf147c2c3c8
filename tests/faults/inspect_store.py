"""Reading the daemon's LMDB directly while it is down: after each kill, and once at the end.

After a kill and before the restart, the store holds exactly what the dead
daemon had committed (before a database restart, read just before the database stops, what
the running daemon had committed by then). ``CommitTracker`` reads the events appended since the
last look and notes, for every native tool call, the first kill by which its
result was committed, and for every handle, how many model replies were
committed by then. A call or a model request issued by a *later* daemon for
something already committed is a re-execution the design forbids.
``read_store`` takes the final picture (events, handles, transcripts) once
the daemon has stopped. Both go through the daemon's own store reader:
``LmdbStore``, which also takes the directory lock (a daemon still alive would
make them fail loudly instead of reading a moving store), or ``PgStore`` when
the daemon keeps its state in PostgreSQL (TOOLNEXUS_TEST_STORE=postgres).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from tests.support.daemon import DaemonProcess
from toolnexus_daemon.model import JSON, Event, EventType
from toolnexus_daemon.store import LmdbStore
from toolnexus_daemon.store.base import Store

PAGE = 5000


def open_daemon_store(daemon: DaemonProcess, beside: bool = False) -> Store:
    """The store the (stopped or killed) daemon wrote, opened with the daemon's own code.
    ``beside``: the daemon still runs (a database restart is about to happen): PostgreSQL only
    (the database is shared by design; LMDB's directory lock keeps a second process out)."""
    if daemon.store_dsn:
        from toolnexus_daemon.store.postgres.store import PgStore

        return PgStore(daemon.store_dsn)
    assert not beside, "LMDB is read only while its daemon is down"
    return LmdbStore(daemon.data_dir)


def all_events(store: Store, rid: str, after: int = 0) -> list[Event]:
    out: list[Event] = []
    while True:
        page = store.events(rid, after_seq=after, limit=PAGE)
        out.extend(page)
        if len(page) < PAGE:
            return out
        after = page[-1].seq


@dataclass
class CommitTracker:
    daemon: DaemonProcess
    runtime_ids: list[str]
    # call_id -> index of the first kill by which its result was committed
    tool_done_at: dict[str, int] = field(default_factory=dict)
    # (runtime id, handle, model call number) -> index of the first kill by which its reply was committed
    model_done_at: dict[tuple[str, str, int], int] = field(default_factory=dict)
    # per kill: the last committed seq of each runtime
    last_seqs: list[dict[str, int]] = field(default_factory=list)
    _read: dict[str, int] = field(default_factory=dict)
    _model_calls: dict[tuple[str, str], int] = field(default_factory=lambda: defaultdict(int))

    def after_kill(self, kill: int, beside: bool = False) -> None:
        """Note what was committed by fault ``kill``; ``beside``: the daemon still runs (read just
        before a database restart: a commit that lands after the read counts for the next fault,
        which only makes the checks more lenient, never wrong)."""
        store = open_daemon_store(self.daemon, beside)
        try:
            for rid in self.runtime_ids:
                for event in all_events(store, rid, self._read.get(rid, 0)):
                    self._note(kill, rid, event)
                    self._read[rid] = event.seq
            self.last_seqs.append(dict(self._read))
        finally:
            store.close()

    def _note(self, kill: int, rid: str, event: Event) -> None:
        if event.type is EventType.TOOL_RESULT and event.data and event.data.get("tool") != "task":
            self.tool_done_at.setdefault(str(event.data["call_id"]), kill)
        elif event.type is EventType.MODEL_CALL:
            self._model_calls[(rid, event.handle)] += 1
            self.model_done_at[(rid, event.handle, self._model_calls[(rid, event.handle)])] = kill


@dataclass
class StoreView:
    """The final store, read after the daemon stopped."""

    events: dict[str, list[Event]]
    handles: dict[str, dict[str, JSON]]
    messages: dict[tuple[str, str], list[JSON]]


def read_store(daemon: DaemonProcess, runtime_ids: list[str]) -> StoreView:
    store = open_daemon_store(daemon)
    try:
        events = {rid: all_events(store, rid) for rid in runtime_ids}
        handles = {rid: {h["id"]: h for h in store.handles(rid)} for rid in runtime_ids}
        messages = {(rid, hid): store.messages(rid, hid) for rid in runtime_ids for hid in handles[rid]}
    finally:
        store.close()
    return StoreView(events, handles, messages)
