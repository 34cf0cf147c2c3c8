"""The contract suite's ``store`` fixture: every test using it runs on memory, LMDB and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.pg_fixtures import pg_dsn, pg_server
from toolnexus_daemon.store import LmdbStore, MemoryStore, Store
from toolnexus_daemon.store.postgres.store import PgStore

__all__ = ["pg_dsn", "pg_server"]


@pytest.fixture(params=["memory", "lmdb", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    opened: Store
    if request.param == "memory":
        opened = MemoryStore()
    elif request.param == "lmdb":
        opened = LmdbStore(tmp_path / "data", map_size=1 << 24)
    else:
        opened = PgStore(request.getfixturevalue("pg_dsn"))
    yield opened
    opened.close()
