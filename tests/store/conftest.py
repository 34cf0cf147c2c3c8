"""The contract suite's ``store`` fixture: every test using it runs on both implementations."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from toolnexus_daemon.store import LmdbStore, MemoryStore, Store


@pytest.fixture(params=["memory", "lmdb"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    opened: Store = MemoryStore() if request.param == "memory" else LmdbStore(tmp_path / "data",
                                                                              map_size=1 << 24)
    yield opened
    opened.close()
