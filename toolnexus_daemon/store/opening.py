"""Which store a daemon opens: LMDB in ``--data-dir``, or PostgreSQL when ``--store`` names a database.

A database that cannot be reached at start is waited for, with backoff, rather than
failing the start: the daemon usually starts beside its database (a compose file, a
pod) and whichever comes up first should not decide the outcome. Every failed try is
logged with the DSN redacted. A schema newer than the daemon, or a refused password,
ends the start at once: waiting cannot fix those.
"""

from __future__ import annotations

import logging
import time

from ..config import Settings
from ..errors import StoreUnavailable
from .base import Store
from .lmdb.store import LmdbStore

log = logging.getLogger("toolnexus_daemon.store")

START_BACKOFF_MAX_S = 5.0


def open_store(settings: Settings, *, wait_s: float | None = None) -> Store:
    """The store ``settings`` name; waits up to ``wait_s`` (None: for ever) for a PostgreSQL database."""
    if not settings.store:
        return LmdbStore(settings.data_dir, map_size=settings.map_size, sync=settings.sync)
    from .postgres.store import PgStore  # the driver loads only for a daemon that uses it

    deadline = None if wait_s is None else time.monotonic() + wait_s
    delay = 0.1
    while True:
        try:
            return PgStore(settings.store, password=settings.store_password, sync=settings.sync)
        except StoreUnavailable as exc:
            if deadline is not None and time.monotonic() + delay > deadline:
                raise
            log.warning("store database not reachable yet; retrying", extra={"error": str(exc),
                                                                            "retry_in_s": delay})
            time.sleep(delay)
            delay = min(delay * 2, START_BACKOFF_MAX_S)


def store_location(settings: Settings) -> str:
    """Where the state lives, as logs show it (the DSN redacted)."""
    return settings.redacted()["store"] or str(settings.data_dir)
