"""The daemon's link to one PostgreSQL database: DSN, password, connections, outage and reconnect.

The DSN is what the operator passed to ``--store`` (``postgresql://user@host:port/db`` or the
unix-socket form ``postgresql://postgres:@/db?host=/socketdir``). The password never rides in
it when it can be helped: it comes from ``--store-password-file`` /
``TOOLNEXUS_STORE_PASSWORD_FILE``, or libpq's own ``PGPASSWORD`` / ``~/.pgpass``, which libpq
reads itself. Everything that shows the DSN (logs, ``Info``, errors) shows ``redacted``.

``Link`` knows whether the database is reachable. A connection error anywhere marks it down
(callbacks fire: health goes NOT_SERVING) and starts one prober thread that reconnects with
exponential backoff; while down, every use fails at once with ``StoreUnavailable`` naming the
database, so no caller waits on a dead socket and the event loop never blocks on a connect.
Once a probe connects, the link is up again and the callbacks fire with ``True``.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable
from typing import TypeVar

import psycopg
from psycopg import errors as pgerr

from ...errors import LeaseLost, StoreError, StoreFull, StoreUnavailable
from ..dsn import redact
from .schema import FENCE_SQLSTATE

log = logging.getLogger("toolnexus_daemon.store")

BACKOFF_FIRST_S = 0.1
BACKOFF_MAX_S = 5.0
CONNECT_TIMEOUT_S = 5
# how long sent data may stay unacknowledged before the kernel drops the connection (TCP only): a
# database black-holed mid-statement fails the statement instead of hanging until keepalives notice
TCP_USER_TIMEOUT_MS = 20_000


StateListener = Callable[[bool], None]


class Link:
    """Connections to one database and whether it is reachable (see the module docstring)."""

    def __init__(self, dsn: str, *, password: str | None = None, sync: bool = True) -> None:
        self.dsn, self.redacted, self._password, self._sync = dsn, redact(dsn), password, sync
        self._lock = threading.Lock()
        self._up = True
        self._probing = False
        self._closed = False
        self._listeners: list[StateListener] = []
        self.last_error = ""
        # bumped by every outage: a connection opened before one is not reused after it
        self.generation = 0
        # run by the reconnect prober before the link counts as up again (the owner lock is taken
        # there); a StoreError it raises keeps the link down and the prober trying
        self.before_up: Callable[[], None] | None = None

    @property
    def name(self) -> str:
        return f"PostgreSQL database {self.redacted}"

    @property
    def up(self) -> bool:
        return self._up

    def on_change(self, listener: StateListener) -> None:
        self._listeners.append(listener)

    def connect(self, *, autocommit: bool,
                extra: dict[str, object] | None = None) -> psycopg.Connection[tuple[object, ...]]:
        """A new connection (synchronous_commit per ``sync``; ``extra``: more connection parameters);
        raises ``StoreUnavailable`` when it cannot."""
        if not self._up:
            raise self.unavailable()
        try:
            return self._open(autocommit, extra)
        except psycopg.Error as exc:
            raise self.failed(exc) from exc

    def open_session(self) -> psycopg.Connection[tuple[object, ...]]:
        """A new autocommit connection even while the link is down (the prober's own checks)."""
        try:
            return self._open(True)
        except psycopg.Error as exc:
            raise self.failed(exc) from exc

    async def connect_async(self) -> psycopg.AsyncConnection[tuple[object, ...]]:
        """A new autocommit connection for the event loop (a commit lane's, ``lanes``), opened
        without blocking it; raises ``StoreUnavailable`` when it cannot."""
        if not self._up:
            raise self.unavailable()
        try:
            conn = await psycopg.AsyncConnection.connect(self.dsn, autocommit=True,
                                                         **self._kwargs())  # type: ignore[arg-type]
        except psycopg.Error as exc:
            raise self.failed(exc) from exc
        try:
            await conn.execute(self._sync_sql())
            return conn
        except BaseException as exc:
            conn.pgconn.finish()
            if not isinstance(exc, psycopg.Error):
                raise
            raise self.failed(exc) from exc

    def _kwargs(self, extra: dict[str, object] | None = None) -> dict[str, object]:
        kwargs: dict[str, object] = {"connect_timeout": CONNECT_TIMEOUT_S, "keepalives": 1,
                                     "keepalives_idle": 10, "keepalives_interval": 5, "keepalives_count": 3,
                                     "tcp_user_timeout": TCP_USER_TIMEOUT_MS,
                                     "application_name": application_name(), **(extra or {})}
        if self._password is not None:
            kwargs["password"] = self._password
        return kwargs

    def _sync_sql(self) -> str:
        return "SET synchronous_commit = " + ("on" if self._sync else "off")

    def _open(self, autocommit: bool,
              extra: dict[str, object] | None = None) -> psycopg.Connection[tuple[object, ...]]:
        conn = psycopg.connect(self.dsn, autocommit=True, **self._kwargs(extra))  # type: ignore[arg-type]
        conn.execute(self._sync_sql())
        conn.autocommit = autocommit
        return conn

    def unavailable(self) -> StoreUnavailable:
        why = f": {self.last_error}" if self.last_error else ""
        return StoreUnavailable(f"the {self.name} is unreachable{why}; the daemon reconnects by itself, "
                                "retry shortly")

    def failed(self, exc: BaseException) -> StoreError:
        """What ``exc`` (raised by psycopg) means to a caller; a lost connection marks the link down."""
        if is_connection_error(exc):
            self.mark_down(exc)
            return self.unavailable()
        if isinstance(exc, psycopg.Error) and exc.sqlstate == FENCE_SQLSTATE:
            return LeaseLost(f"{_first_line(exc)}: another daemon owns the runtime now; retry the call")
        if _out_of_room(exc):
            return StoreFull(f"the {self.name} refused the write: {_first_line(exc)}")
        return StoreError(f"the {self.name} failed: {_first_line(exc)}")

    def mark_down(self, exc: BaseException) -> None:
        with self._lock:
            self.last_error = _first_line(exc)
            was_up, self._up = self._up, False
            self.generation += 1 if was_up else 0
            start = not self._probing and not self._closed
            self._probing = self._probing or start
        if was_up:
            log.error("store database unreachable", extra={"store": self.redacted, "error": self.last_error})
            self._notify(False)
        if start:
            threading.Thread(target=self._probe, name="pg-reconnect", daemon=True).start()

    def _probe(self) -> None:
        delay = BACKOFF_FIRST_S
        stop = threading.Event()
        while not self._closed:
            stop.wait(delay)
            try:
                with self._open(autocommit=True) as conn:
                    conn.execute("SELECT 1")
                if self.before_up is not None:
                    self.before_up()
            except (psycopg.Error, StoreError) as exc:
                self.last_error = _first_line(exc)
                delay = min(delay * 2, BACKOFF_MAX_S)
                continue
            with self._lock:
                self._up, self._probing = True, False
            log.warning("store database reachable again", extra={"store": self.redacted})
            self._notify(True)
            return
        with self._lock:
            self._probing = False

    def _notify(self, up: bool) -> None:
        for listener in list(self._listeners):
            try:
                listener(up)
            except Exception:  # a listener must not stop the prober
                log.exception("store state listener failed")

    def close(self) -> None:
        self._closed = True


def application_name() -> str:
    """How the daemon's sessions appear in ``pg_stat_activity`` (63 bytes at most, as PostgreSQL keeps):
    enough to tell which daemon a session belongs to."""
    return f"toolnexus-daemon pid={os.getpid()} host={socket.gethostname()}"[:63]


def is_connection_error(exc: BaseException) -> bool:
    """A connection refused, lost or shut down by the server: worth retrying once it is back.
    Client-side failures carry no SQLSTATE; the server's are class 08 and 57P (shutdown)."""
    if not isinstance(exc, psycopg.OperationalError):
        return isinstance(exc, psycopg.InterfaceError)
    state = exc.sqlstate
    if state is None:  # refused, reset, closed… but not a refusal waiting cannot fix
        text = str(exc)
        return not any(word in text for word in _FINAL_REFUSALS)
    return state.startswith("08") or state in ("57P01", "57P02", "57P03")


_FINAL_REFUSALS = ("authentication failed", "does not exist", "no password supplied", "no pg_hba.conf entry",
                   "invalid connection option", "invalid URI", "missing \"=\"")


def is_retryable(exc: BaseException) -> bool:
    """A conflict with another transaction: the same transaction again may succeed."""
    return isinstance(exc, (pgerr.SerializationFailure, pgerr.DeadlockDetected))


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


T = TypeVar("T")
Conn = psycopg.Connection[tuple[object, ...]]


class OneConnection:
    """One autocommit connection of a link, reopened when found dead or opened before an outage.

    ``run`` calls ``work`` on it. A connection error on a connection that had been
    idle (the server restarted meanwhile) is tried once more on a fresh one before the
    database counts as down; that repeat is safe because every store write is an
    idempotent upsert or delete. Errors leave as ``StoreError`` (``Link.failed``).
    """

    def __init__(self, link: Link, extra: dict[str, object] | None = None) -> None:
        self._link, self._extra = link, extra
        self._conn: Conn | None = None
        self._generation = -1

    def run(self, work: Callable[[Conn], T]) -> T:
        for attempt in (0, 1):
            conn, fresh = self._get()
            try:
                return work(conn)
            except psycopg.Error as exc:
                if conn.closed or conn.broken:
                    self.close()
                if attempt == 0 and not fresh and is_connection_error(exc):
                    continue
                raise self._link.failed(exc) from exc
        raise AssertionError("unreachable")

    def _get(self) -> tuple[Conn, bool]:
        conn = self._conn
        if conn is not None and not conn.closed and self._generation == self._link.generation:
            return conn, False
        self.close()
        generation = self._link.generation
        self._conn = self._link.connect(autocommit=True, extra=self._extra)
        self._generation = generation
        return self._conn, True

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()


def _out_of_room(exc: BaseException) -> bool:
    """Class 53 (insufficient resources: disk full, out of memory) or 54 (a program limit such as a
    value too large): the write cannot succeed as sent, a retry will not help (RESOURCE_EXHAUSTED)."""
    state = getattr(exc, "sqlstate", None) or ""
    return state[:2] in ("53", "54")
