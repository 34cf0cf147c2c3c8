"""Run-wide test settings: the ``lmdb_only`` mark, the session's headless browser, and the fuzz
suite's case count gathered from parallel workers.

A run with TOOLNEXUS_TEST_STORE=postgres (half of `make test-all`) starts every daemon on a
PostgreSQL database; tests that damage, fill or lock LMDB files on purpose have no meaning there
and are skipped, each naming why. Their PostgreSQL counterparts live in tests/store/test_pg.py and
tests/e2e/test_postgres.py.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

# the browser tests' fixtures: one chromium per session (per pytest-xdist worker), clean per test
from tests.support.browser import browser, chromium  # noqa: F401
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


# under pytest-xdist (`make test` runs with workers) the fuzz suite counts its cases in the workers
# (tests/fuzz/conftest.py hands them over as ``workeroutput``); the controller prints the total
_FUZZ_CASES: Counter[str] = Counter()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    _FUZZ_CASES.update(getattr(node, "workeroutput", {}).get("fuzz_cases", {}))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _FUZZ_CASES:
        detail = ", ".join(f"{name} {n}" for name, n in sorted(_FUZZ_CASES.items()))
        terminalreporter.write_line(f"fuzz: {sum(_FUZZ_CASES.values())} cases ({detail})")
