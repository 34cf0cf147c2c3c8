"""The MemoryStore's test hook: making the next commit fail like a full map."""

from __future__ import annotations

import pytest

from toolnexus_daemon.errors import StoreFull
from toolnexus_daemon.store import Batch, MemoryStore


async def test_fail_next_commit_fails_once_and_keeps_nothing() -> None:
    store = MemoryStore()
    store.fail_next_commit(StoreFull("map full"))

    with pytest.raises(StoreFull, match="map full"):
        await store.commit(Batch(runtimes={"r1": {}}))
    assert store.runtime_ids() == []

    await store.commit(Batch(runtimes={"r1": {}}))
    assert store.runtime_ids() == ["r1"]
