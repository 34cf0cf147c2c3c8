"""Prometheus metrics of the daemon: what the engine commits, what the store costs, who is connected.

Counters and histograms are fed by the engine's observer (``observe``: called
after every commit with its events, so a metric never counts work that was
not durable), by ``TimedStore`` (commit latency and size) and by the servicer
(resume outcomes, which only ``Resume`` can tell apart). Gauges are read at
scrape time by ``_Live``: runtimes, watchers, workers, LMDB size, and handle
states and open suspensions from the counts the store keeps with every handle
write (``Store.census``) — the engine's in-memory handles are a bounded
working set, not a census, and counting from the store means the gauges
report only durable state and cost nothing per parked handle. Everything lives in one
private registry, so tests and a second daemon in one process never share
state.
"""

from __future__ import annotations

import logging
import time
from collections import Counter as Tally
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric

from . import __version__
from .model import JSON, Event, EventType, HandleState
from .store.base import Batch, HandleCensus, Store, StoreInfo

log = logging.getLogger("toolnexus_daemon.metrics")

RESUME_OUTCOMES = ("ok", "declined", "duplicate", "unknown")
TOOL_SOURCES = ("native", "webhook", "http", "task")
TOOL_OUTCOMES = ("ok", "error", "pending")
CALL_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
COMMIT_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5)
RECORD_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 512, 2048)


class Metrics:
    """Every metric family of one daemon, in its own registry."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.registry = CollectorRegistry()
        self._clock = clock
        self._observer_failed = False
        r = self.registry
        Gauge("toolnexus_build_info", "The daemon's version (value is always 1).", ["version"],
              registry=r).labels(__version__).set(1)
        self.resumes = Counter("toolnexus_resumes", "Resume calls by outcome.", ["outcome"], registry=r)
        self.model_calls = Counter("toolnexus_model_calls", "Completed model calls.", registry=r)
        self.model_latency = Histogram("toolnexus_model_call_duration_seconds", "Model call latency.",
                                       buckets=CALL_BUCKETS, registry=r)
        self.tokens = Counter("toolnexus_model_tokens", "Tokens used by model calls.", ["type"], registry=r)
        self.tokens_estimated = Counter(
            "toolnexus_model_tokens_estimated",
            "Tokens counted by estimate because the model server reported no usage.", registry=r)
        self.tool_calls = Counter("toolnexus_tool_calls", "Tool calls by source and outcome.",
                                  ["source", "outcome"], registry=r)
        self.tool_latency = Histogram("toolnexus_tool_call_duration_seconds", "Tool call latency.",
                                      ["source"], buckets=CALL_BUCKETS, registry=r)
        self.events = Counter("toolnexus_events", "Committed events by type.", ["type"], registry=r)
        self.commit_latency = Histogram("toolnexus_store_commit_duration_seconds",
                                        "Time from commit call to durable (synced) commit.",
                                        buckets=COMMIT_BUCKETS, registry=r)
        self.commit_records = Histogram("toolnexus_store_commit_batch_records",
                                        "Records written by one committed batch.", buckets=RECORD_BUCKETS,
                                        registry=r)
        for outcome in RESUME_OUTCOMES:
            self.resumes.labels(outcome)
        for kind in ("prompt", "completion"):
            self.tokens.labels(kind)
        for source in TOOL_SOURCES:
            for outcome in TOOL_OUTCOMES:
                self.tool_calls.labels(source, outcome)

    def bind(self, engine: Any, hub: Any) -> None:
        """Read runtimes, watchers, workers and the store at scrape time from these."""
        self.registry.register(_Live(engine, hub, self._clock))

    def resume_outcome(self, outcome: str) -> None:
        self.resumes.labels(outcome).inc()

    def observe(self, rt: Any, events: list[Event]) -> None:
        """The engine's observer: never raises, never blocks (it runs under the commit lock)."""
        try:
            for ev in events:
                self._count(rt.id, ev)
        except Exception:
            if not self._observer_failed:  # once: a bug here must not flood the log on every commit
                self._observer_failed = True
                log.exception("metrics observer failed; some metrics may be off")

    def _count(self, runtime_id: str, ev: Event) -> None:
        self.events.labels(str(ev.type)).inc()
        data = ev.data or {}
        if ev.type is EventType.MODEL_CALL:
            usage = data.get("usage") or {}
            self.model_calls.inc()
            self.model_latency.observe(float(data.get("latency_ms") or 0) / 1000)
            self.tokens.labels("prompt").inc(max(0, int(usage.get("prompt_tokens") or 0)))
            self.tokens.labels("completion").inc(max(0, int(usage.get("completion_tokens") or 0)))
            if usage.get("estimated"):
                self.tokens_estimated.inc(max(0, int(usage.get("total_tokens") or 0)))
        elif ev.type is EventType.TOOL_RESULT:
            source = str(data.get("source") or "unknown")
            self.tool_calls.labels(source, str(data.get("outcome") or "ok")).inc()
            self.tool_latency.labels(source).observe(float(data.get("latency_ms") or 0) / 1000)

    def instrument(self, store: Any) -> TimedStore:
        return TimedStore(store, self)


# ---------------------------------------------------------------- scrape-time gauges


class _Live:
    """Gauges read when Prometheus scrapes (on the event loop: see ``api.metrics_http``)."""

    def __init__(self, engine: Any, hub: Any, clock: Callable[[], float]) -> None:
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

    def _census(self, runtimes: list[Any]) -> tuple[Tally[str], dict[str, tuple[int, float]]]:
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


def _store_families(store: Any) -> Iterator[Metric]:
    try:
        info: StoreInfo = store.info()
    except Exception:  # closed while shutting down: report nothing rather than fail the scrape
        return
    yield _gauge("toolnexus_store_size_bytes", "Bytes of the LMDB map in use.", info.size_bytes)
    yield _gauge("toolnexus_store_map_size_bytes", "The LMDB map size (--map-size).", info.map_size_bytes)
    yield _gauge("toolnexus_store_map_used_ratio", "Share of the LMDB map in use; full = RESOURCE_EXHAUSTED.",
                 info.size_bytes / info.map_size_bytes if info.map_size_bytes else 0.0)
    stats = getattr(store, "stats", None)
    if callable(stats):
        s = stats()
        yield GaugeMetricFamily("toolnexus_store_group_commit_batches",
                                "Batches committed so far (group commit shares a transaction).",
                                value=s.batches)
        yield GaugeMetricFamily("toolnexus_store_group_commit_transactions",
                                "Write transactions so far; batches / transactions = the mean group size.",
                                value=s.transactions)


# ---------------------------------------------------------------- the store, timed


class TimedStore:
    """The ``Store`` protocol around another store, timing and sizing each commit."""

    def __init__(self, inner: Store, metrics: Metrics) -> None:
        self.inner = inner
        self._metrics = metrics

    async def commit(self, batch: Batch) -> None:
        started = time.perf_counter()
        await self.inner.commit(batch)
        self._metrics.commit_latency.observe(time.perf_counter() - started)
        self._metrics.commit_records.observe(batch_records(batch))

    def runtime_ids(self) -> list[str]:
        return self.inner.runtime_ids()

    def get_runtime(self, runtime_id: str) -> JSON | None:
        return self.inner.get_runtime(runtime_id)

    def handles(self, runtime_id: str) -> list[JSON]:
        return self.inner.handles(runtime_id)

    def handles_to_recover(self, runtime_id: str) -> list[str]:
        return self.inner.handles_to_recover(runtime_id)

    def census(self, runtime_id: str) -> HandleCensus:
        return self.inner.census(runtime_id)

    def get_handle(self, runtime_id: str, handle_id: str) -> JSON | None:
        return self.inner.get_handle(runtime_id, handle_id)

    def messages(self, runtime_id: str, handle_id: str, start: int = 0, end: int | None = None) -> list[JSON]:
        return self.inner.messages(runtime_id, handle_id, start, end)

    def get_checkpoint(self, runtime_id: str, handle_id: str) -> JSON | None:
        return self.inner.get_checkpoint(runtime_id, handle_id)

    def get_request(self, runtime_id: str, request_id: str) -> JSON | None:
        return self.inner.get_request(runtime_id, request_id)

    def events(self, runtime_id: str, after_seq: int = 0, limit: int = 1000) -> list[Event]:
        return self.inner.events(runtime_id, after_seq, limit)

    def last_seq(self, runtime_id: str) -> int:
        return self.inner.last_seq(runtime_id)

    def info(self) -> StoreInfo:
        return self.inner.info()

    def close(self) -> None:
        self.inner.close()

    def __getattr__(self, name: str) -> Any:
        # whatever else a store grows (first_seq for event retention, ...) passes straight through
        return getattr(self.inner, name)


def batch_records(batch: Batch) -> int:
    return (len(batch.runtimes) + len(batch.handles) + len(batch.messages) + len(batch.truncate)
            + len(batch.checkpoints) + len(batch.requests) + len(batch.events) + len(batch.purge))
