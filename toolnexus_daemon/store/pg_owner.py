"""One daemon per PostgreSQL database, as one daemon per LMDB directory: a session advisory lock.

Until daemons can share a database as a cluster (fenced leases per runtime), two daemons
recovering and serving the same runtimes would each run their turns and interleave their
commits. So the store holds ``pg_advisory_lock(OWNER_KEY)`` on a connection of its own for
as long as it is open. PostgreSQL releases it when that session ends, so a daemon killed with
SIGKILL never blocks its own restart (the restart waits a few seconds for the old session to
end, as the server notices the closed socket). After an outage the lock is taken again before
the link counts as up; if another daemon took it meanwhile, this one stays NOT_SERVING.

The holder is named from ``pg_stat_activity``: every connection of the daemon carries
``application_name`` ``toolnexus-daemon pid=N host=H`` (``pg_link.application_name``).
"""

from __future__ import annotations

import threading
import time

import psycopg

from ..errors import StoreLocked
from .pg_link import Link

OWNER_KEY = 0x746E6F77  # "tnow"; schema migrations use a transaction-level lock of their own key
TAKE_WAIT_S = 10.0

_HOLDER_SQL = """
SELECT a.application_name, host(a.client_addr), a.pid
FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.granted AND l.classid = 0 AND l.objid = %s AND l.objsubid = 1
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
LIMIT 1
"""


class OwnerLock:
    """The database's single-daemon lock, held on a dedicated connection of ``link``."""

    def __init__(self, link: Link) -> None:
        self._link = link
        self._conn: psycopg.Connection[tuple[object, ...]] | None = None
        self._guard = threading.Lock()

    def take(self, wait_s: float = TAKE_WAIT_S) -> None:
        """Hold the lock, waiting up to ``wait_s`` for a previous holder's session to end; raises
        ``StoreLocked`` naming the holder, or ``StoreUnavailable`` when the database is unreachable."""
        deadline = time.monotonic() + wait_s
        while True:
            holder = self._try_once()
            if holder is None:
                return
            if time.monotonic() >= deadline:
                raise StoreLocked(
                    f"the {self._link.name} is in use by another toolnexus-daemon ({holder}); stop it, or "
                    "give each daemon a database of its own (several daemons on one database need the "
                    "cluster mode, not built yet)")
            time.sleep(0.2)

    def _try_once(self) -> str | None:
        """None when taken; else who holds it."""
        with self._guard:
            self.release()
            conn = self._link.open_session()
            try:
                row = conn.execute("SELECT pg_try_advisory_lock(%s)", (OWNER_KEY,)).fetchone()
                if row is not None and row[0]:
                    self._conn = conn
                    return None
                found = conn.execute(_HOLDER_SQL.encode(), (OWNER_KEY,)).fetchone()
            except psycopg.Error as exc:
                conn.close()
                raise self._link.failed(exc) from exc
            conn.close()
            if found is None:
                return "a session that has just ended"
            name, addr, pid = found
            return f"{name or 'unnamed session'}, backend pid {pid}" + (f", from {addr}" if addr else "")

    def release(self) -> None:
        """Close the lock's session (PostgreSQL drops the lock with it)."""
        conn, self._conn = self._conn, None
        if conn is not None and not conn.closed:
            conn.close()
