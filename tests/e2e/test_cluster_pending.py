"""The pending inbox in a cluster (docs/protocol.md §9, §10): two daemons on one PostgreSQL
database; either lists the suspensions of runtimes the other owns, and a WatchPending on one
follows changes committed by the other (the hub polls the shared index)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.test_cluster import Node, _owner, _suspend, running
from tests.support.pg_fixtures import pg_dsn, pg_server
from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_devtools import ScriptedModelServer

__all__ = ["pg_dsn", "pg_server"]


@pytest.fixture
def pair(pg_dsn: str, tmp_path: Path) -> Iterator[dict[str, Node]]:
    with running(("a", "b"), pg_dsn, tmp_path) as nodes:
        yield nodes


@pytest.fixture
def model() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as server:
        yield server


def test_the_non_owner_lists_and_watches_the_owners_suspensions(pair: dict[str, Node], pg_dsn: str,
                                                                 model: ScriptedModelServer) -> None:
    a, b = pair["a"].stub, pair["b"].stub
    rid, first, request_id = _suspend(a, model)
    assert _owner(pg_dsn, rid)[0] == "a"

    items = b.ListPending(pb.ListPendingRequest(runtime_id=rid), timeout=10).items
    assert [(i.handle, i.request.id) for i in items] == [(first, request_id)]
    summaries = b.ListRuntimes(pb.ListRuntimesRequest(page_size=1000), timeout=10).runtimes
    assert rid in {r.runtime_id for r in summaries}

    watch = b.WatchPending(pb.WatchPendingRequest(runtime_id=rid), timeout=30)
    try:
        opened = next(watch)
        assert (opened.type, opened.item.handle) == ("ADDED", first)
        assert next(watch).type == "SYNCED"

        second = a.Spawn(pb.SpawnRequest(runtime_id=rid, agent="approver"), timeout=10).handle
        a.Wake(pb.WakeRequest(runtime_id=rid, handle=second, prompt="again"), timeout=10)
        added = next(watch)
        assert (added.type, added.item.handle, added.item.runtime_id) == ("ADDED", second, rid)

        a.Resume(pb.ResumeRequest(runtime_id=rid, answer=pb.Answer(id=request_id, ok=True)), timeout=20)
        removed = next(watch)
        assert (removed.type, removed.item.handle, removed.reason) == ("REMOVED", first, "answered")
    finally:
        watch.cancel()
    assert _owner(pg_dsn, rid)[0] == "a"  # listing and watching never moved the runtime


