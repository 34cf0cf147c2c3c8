"""A damaged handle record never hides the rest of the pending inbox: the engine's inbox read (what
ListPending serves) leaves it out of its page and logs its key (a real LMDB directory, the record
overwritten behind the store's back)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tests.store.test_lmdb import write_raw
from tests.store.test_pending import SEEDED
from toolnexus_daemon.engine.verbs.inbox import OpenScan, Visibility, list_pending, presented, scan_open
from toolnexus_daemon.store import Batch, LmdbStore
from toolnexus_daemon.store.base import PendingQuery
from toolnexus_daemon.store.codec import Table, pair_key


async def seeded(data_dir: Path) -> None:
    store = LmdbStore(data_dir)
    try:
        await store.commit(Batch(runtimes={"r1": {"id": "r1"}, "r2": {"id": "r2"}}, handles=dict(SEEDED)))
    finally:
        store.close()


def listed(store: LmdbStore) -> list[tuple[str, str]]:
    page = list_pending(store, PendingQuery(), Visibility(presented("")))
    return [(item.runtime_id, item.handle) for item in page.items]


async def test_a_damaged_record_is_left_out_and_logged_the_rest_still_listed(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    await seeded(tmp_path)
    write_raw(tmp_path, Table.HANDLES, pair_key("r1", "root/b"), b"TN\x01{not json")
    store = LmdbStore(tmp_path)
    try:
        with caplog.at_level(logging.ERROR, logger="toolnexus_daemon.engine"):
            assert listed(store) == [("r2", "root/a"), ("r1", "root/a"), ("r2", "root/x"), ("r2", "root/p/c")]
        damaged = [r for r in caplog.records if getattr(r, "handle", None) == "root/b"]
        assert damaged and damaged[0].__dict__["runtime"] == "r1"
        watched = OpenScan(None, {})  # what WatchPending lists leaves it out too
        while not watched.done:
            scan_open(store, watched)
        assert sorted(k[:2] for k in watched.found) == sorted(listed(store))
    finally:
        store.close()
