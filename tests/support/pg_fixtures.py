"""Pytest fixtures for a real PostgreSQL server: one per test session, a fresh database per test.

Import them into a ``conftest.py`` (``from tests.support.pg_fixtures import pg_server, pg_dsn``).
"""

from __future__ import annotations

import atexit
from collections.abc import Iterator

import pytest

from .pg import PgServer

_server: PgServer | None = None


def shared_server() -> PgServer:
    """The session's server, started on first use (a test that stops it must start it again)."""
    global _server
    if _server is None:
        _server = PgServer()
        atexit.register(_server.destroy)  # a run outside pytest (make chaos) leaves no server behind
        _server.start()
    return _server


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    server = shared_server()
    yield server
    global _server
    _server = None
    server.destroy()


@pytest.fixture
def pg_dsn(pg_server: PgServer) -> str:
    """The DSN (unix socket, no password) of a database of this test's own."""
    return pg_server.create_database()
