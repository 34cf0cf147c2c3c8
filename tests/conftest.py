"""Run-wide test settings: the ``lmdb_only`` mark.

A run with TOOLNEXUS_TEST_STORE=postgres (half of `make test-all`) starts every daemon on a
PostgreSQL database; tests that damage, fill or lock LMDB files on purpose have no meaning there
and are skipped, each naming why. Their PostgreSQL counterparts live in tests/store/test_pg.py and
tests/e2e/test_postgres.py.
"""

from __future__ import annotations

import pytest

from tests.support.daemon import run_store


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "lmdb_only: the test reaches into LMDB files (skipped on PostgreSQL)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if run_store() != "postgres":
        return
    skip = pytest.mark.skip(reason="reaches into LMDB files; TOOLNEXUS_TEST_STORE=postgres")
    for item in items:
        if item.get_closest_marker("lmdb_only"):
            item.add_marker(skip)
