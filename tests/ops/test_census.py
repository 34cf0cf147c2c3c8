"""The scrape-time gauges read the engine and the hub through the census protocols of ``observe``.

The daemon test (test_metrics.py) checks the figures end to end; this one checks what the
protocols leave open: the group-commit totals come from the engine's committer whatever the
store (LMDB through the timing wrapper, or memory), and a closed store costs the scrape its
store families, not the scrape.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from toolnexus_daemon.observe.census import CensusStore
from toolnexus_daemon.observe.metrics import Metrics
from toolnexus_daemon.store.base import Batch, Store
from toolnexus_daemon.store.lmdb.store import LmdbStore
from toolnexus_daemon.store.memory import MemoryStore


@dataclass
class Bus:
    watchers: int

    def count(self) -> int:
        return self.watchers


@dataclass
class Loaded:
    id: str
    bus: Bus


@dataclass(frozen=True)
class Counts:
    batches: int
    transactions: int


@dataclass(frozen=True)
class Held:
    total: int
    max_bytes: int
    reads: dict[tuple[str, bool], int] = field(default_factory=lambda: {("transcript", True): 5,
                                                                        ("request", False): 2})


@dataclass
class Engine:
    """Just what ``RuntimeCensus`` asks of the engine."""

    store: CensusStore
    loaded: list[Loaded] = field(default_factory=list)
    commits: Counts = field(default_factory=lambda: Counts(7, 2))
    held: Held = field(default_factory=lambda: Held(1200, 16 << 20))

    def runtimes(self) -> list[Loaded]:
        return self.loaded

    def commit_stats(self) -> Counts:
        return self.commits


@dataclass
class Hub:
    connected: int

    def count(self) -> int:
        return self.connected


def families(metrics: Metrics) -> dict[str, float]:
    text = generate_latest(metrics.registry).decode()
    return {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples if not s.labels}


def bound(store: Store) -> tuple[Metrics, Store]:
    metrics = Metrics()
    timed = metrics.instrument(store)
    engine = Engine(timed, [Loaded("r1", Bus(2)), Loaded("r2", Bus(1))])
    metrics.bind(engine, Hub(3))
    return metrics, timed


async def test_lmdb_through_the_timing_wrapper_reports_its_families(tmp_path: Path) -> None:
    metrics, timed = bound(LmdbStore(tmp_path / "data"))
    try:
        await timed.commit(Batch(purge=["r-none"]))
        got = families(metrics)
        assert got["toolnexus_runtimes"] == 2
        assert got["toolnexus_watchers"] == 3
        assert got["toolnexus_workers_connected"] == 3
        assert got["toolnexus_store_group_commit_batches"] == 7
        assert got["toolnexus_store_group_commit_transactions"] == 2
        assert got["toolnexus_store_commit_batch_records_count"] == 1
        assert got["toolnexus_store_map_size_bytes"] > 0
    finally:
        timed.close()


def test_group_commit_families_come_from_the_committer_whatever_the_store() -> None:
    metrics, timed = bound(MemoryStore())
    got = families(metrics)
    assert got["toolnexus_runtimes"] == 2
    assert "toolnexus_store_size_bytes" in got
    assert got["toolnexus_store_group_commit_batches"] == 7
    assert got["toolnexus_store_group_commit_transactions"] == 2
    assert (got["toolnexus_held_bytes"], got["toolnexus_held_limit_bytes"]) == (1200, 16 << 20)
    text = generate_latest(metrics.registry).decode()
    assert 'toolnexus_held_reads_total{outcome="held",record="transcript"} 5.0' in text
    assert 'toolnexus_held_reads_total{outcome="missed",record="request"} 2.0' in text


def test_a_closed_store_drops_its_families_not_the_scrape(tmp_path: Path) -> None:
    metrics, timed = bound(LmdbStore(tmp_path / "data"))
    timed.close()
    got = families(metrics)
    assert got["toolnexus_workers_connected"] == 3
    assert "toolnexus_store_size_bytes" not in got
