"""Gauges read when Prometheus scrapes: runtimes, watchers, workers, handle states, the store.

Handle states and open suspensions come from the counts the store keeps with
every handle write (``Store.census``): the engine's in-memory handles are a
bounded working set, not a census, and counting from the store means the
gauges report only durable state and cost nothing per parked handle. The
engine and the hub are read through the protocols of ``observe.census``.
"""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Callable, Iterator, Sequence

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from ..model import HandleState
from .census import CensusStore, CommitCounts, HeldSize, LoadedRuntime, RuntimeCensus, WorkerCensus


class LiveGauges:
    """Gauges read when Prometheus scrapes (on the event loop: see ``web.metrics``)."""

    def __init__(self, engine: RuntimeCensus, hub: WorkerCensus, clock: Callable[[], float]) -> None:
        self._engine, self._hub, self._clock = engine, hub, clock

    def collect(self) -> Iterator[Metric]:
        runtimes = self._engine.runtimes()
        yield _gauge("toolnexus_runtimes", "Runtimes loaded.", len(runtimes))
        yield _gauge("toolnexus_watchers", "Open Watch streams.", sum(rt.bus.count() for rt in runtimes))
        yield _gauge("toolnexus_workers_connected", "Connect worker streams.", self._hub.count())
        states, open_by_kind = self._census(runtimes)
        handles = GaugeMetricFamily("toolnexus_handles", "Handles by state (root excluded).",
                                    labels=["state"])
        for state, n in sorted(states.items()):
            handles.add_metric([state], n)
        yield handles
        yield from _suspension_families(open_by_kind)
        yield from _store_families(self._engine.store)
        yield from _commit_families(self._engine.commit_stats())
        yield from _held_families(self._engine.held)

    def _census(self, runtimes: Sequence[LoadedRuntime]) -> tuple[Tally[str], dict[str, tuple[int, float]]]:
        """Every runtime's durable counts from the store's indexes: a few reads per runtime,
        whatever the number of handles."""
        now = self._clock()
        states: Tally[str] = Tally({str(s): 0 for s in HandleState})
        open_by_kind: dict[str, tuple[int, float]] = {}
        for rt in runtimes:
            try:
                census = self._engine.store.census(rt.id)
            except Exception:  # closed while shutting down, or damaged: count what can be read
                continue
            states.update(census.states)
            for kind, (n, since) in census.open.items():
                count, oldest = open_by_kind.get(kind, (0, 0.0))
                age = max(0.0, now - since) if since else 0.0
                open_by_kind[kind] = (count + n, max(oldest, age))
        return states, open_by_kind


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=value)


def _suspension_families(by_kind: dict[str, tuple[int, float]]) -> Iterator[Metric]:
    count = GaugeMetricFamily("toolnexus_suspensions_open",
                              "Durable suspensions awaiting an answer, by kind.", labels=["kind"])
    age = GaugeMetricFamily("toolnexus_suspension_oldest_age_seconds",
                            "Age of the oldest open suspension of each kind.", labels=["kind"])
    for kind, (n, oldest) in sorted(by_kind.items()):
        count.add_metric([kind], n)
        age.add_metric([kind], oldest)
    yield count
    yield age


def _store_families(store: CensusStore) -> Iterator[Metric]:
    try:
        info = store.info()
    except Exception:  # closed while shutting down: report nothing rather than fail the scrape
        return
    yield _gauge("toolnexus_store_size_bytes", "Bytes of the LMDB map in use.", info.size_bytes)
    yield _gauge("toolnexus_store_map_size_bytes", "The LMDB map size (--map-size).", info.map_size_bytes)
    yield _gauge("toolnexus_store_map_used_ratio", "Share of the LMDB map in use; full = RESOURCE_EXHAUSTED.",
                 info.size_bytes / info.map_size_bytes if info.map_size_bytes else 0.0)


def _held_families(held: HeldSize) -> Iterator[Metric]:
    """What the engine holds of its own commits, its bound, and how often a read found it held."""
    yield _gauge("toolnexus_held_bytes", "What the daemon holds of the transcripts and request entries "
                 "it committed (read back without the store), bytes as encoded.", held.total)
    yield _gauge("toolnexus_held_limit_bytes", "The bound on toolnexus_held_bytes (--held-memory).",
                 held.max_bytes)
    reads = CounterMetricFamily("toolnexus_held_reads", "Reads of a transcript or a request entry: "
                                "held (no store read) or missed (read from the store, or within the turn).",
                                labels=["record", "outcome"])
    for (record, was_held), n in sorted(held.reads.items()):
        reads.add_metric([record, "held" if was_held else "missed"], n)
    yield reads


def _commit_families(s: CommitCounts) -> Iterator[Metric]:
    """The committer's totals: the changes of all runtimes share write transactions (group commit)."""
    yield GaugeMetricFamily("toolnexus_store_group_commit_batches",
                            "Changes committed so far (group commit shares a transaction).", value=s.batches)
    yield GaugeMetricFamily("toolnexus_store_group_commit_transactions",
                            "Write transactions so far; batches / transactions = the mean group size.",
                            value=s.transactions)
