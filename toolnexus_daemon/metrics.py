"""Prometheus metrics of the daemon: what the engine commits, what the store costs, who is connected.

Counters and histograms are fed by the engine's observer (``observe``: called
after every commit with its events, so a metric never counts work that was
not durable), by ``TimedStore`` (commit latency and size) and by the servicer
(resume outcomes, which only ``Resume`` can tell apart). Handle states and
open suspensions are tallied per runtime: a scan of the store's handle-state
summaries at start (``scan``), then kept current from ``transition``/``spawned``/``pending``
events, because the engine's in-memory handle cache is a bounded working set,
not a census. Gauges that can be read cheaply (runtimes, watchers, workers,
LMDB size) are read at scrape time by ``_Live``. Everything lives in one
private registry, so tests and a second daemon in one process never share
state.
"""

from __future__ import annotations

import logging
import sys
import time
from collections import Counter as Tally
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric

from . import __version__
from .model import JSON, ROOT_ID, Event, EventType, HandleState
from .store.base import Batch, Store, StoreInfo

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
        self.census = Census(clock)
        self._observer_failed = False
        r = self.registry
        Gauge("toolnexus_build_info", "The daemon's version (value is always 1).", ["version"],
              registry=r).labels(__version__).set(1)
        self.resumes = Counter("toolnexus_resumes", "Resume calls by outcome.", ["outcome"], registry=r)
        self.model_calls = Counter("toolnexus_model_calls", "Completed model calls.", registry=r)
        self.model_latency = Histogram("toolnexus_model_call_duration_seconds", "Model call latency.",
                                       buckets=CALL_BUCKETS, registry=r)
        self.tokens = Counter("toolnexus_model_tokens", "Tokens used by model calls.", ["type"], registry=r)
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
        self.registry.register(_Live(self.census, engine, hub))

    def scan(self, engine: Any) -> None:
        """Take handle states and open suspensions of every loaded runtime from the store."""
        for rt in engine.runtimes():
            self.census.load(rt.id, engine.store.handle_summaries(rt.id))

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
        self.census.apply(runtime_id, ev)
        data = ev.data or {}
        if ev.type is EventType.MODEL_CALL:
            usage = data.get("usage") or {}
            self.model_calls.inc()
            self.model_latency.observe(float(data.get("latency_ms") or 0) / 1000)
            self.tokens.labels("prompt").inc(max(0, int(usage.get("prompt_tokens") or 0)))
            self.tokens.labels("completion").inc(max(0, int(usage.get("completion_tokens") or 0)))
        elif ev.type is EventType.TOOL_RESULT:
            source = str(data.get("source") or "unknown")
            self.tool_calls.labels(source, str(data.get("outcome") or "ok")).inc()
            self.tool_latency.labels(source).observe(float(data.get("latency_ms") or 0) / 1000)

    def instrument(self, store: Any) -> TimedStore:
        return TimedStore(store, self)


# ---------------------------------------------------------------- handle states and suspensions


class _Open:
    """One open Request: its kind, when it was raised, and how many handles are suspended on it
    (a parent suspended on its child's request shares the child's)."""

    __slots__ = ("kind", "since", "holders")

    def __init__(self, kind: str, since: float) -> None:
        self.kind, self.since, self.holders = kind, since, 0


class Census:
    """Handles by state and open suspensions, per runtime (root excluded, as ``List`` excludes it).

    Sized for 100,000 parked handles: per suspended handle it keeps one entry mapping the handle
    to its request id, and per open request one slotted ``_Open`` (kinds interned), about 300
    bytes in all, instead of tuples and sets per entry.
    """

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self.states: dict[str, Tally[str]] = {}
        # runtime -> request id -> the suspension
        self.open: dict[str, dict[str, _Open]] = {}
        # runtime -> suspended handle -> the request id it holds
        self._held: dict[str, dict[str, str]] = {}

    def load(self, runtime_id: str, summaries: Iterable[JSON]) -> None:
        """Count from the store's handle summaries (``store.summary``), read once at start."""
        self.forget(runtime_id)
        tally: Tally[str] = Tally()
        for rec in summaries:
            if rec.get("id") == ROOT_ID:
                continue
            state = str(rec.get("state") or "")
            pending = rec.get("pending") or {}
            if state == HandleState.SUSPENDED and rec.get("escalating"):
                state = HandleState.RUNNING  # recovery turns an inline escalation back into a running turn
            elif state == HandleState.SUSPENDED and pending.get("id"):
                # suspended_at: when the engine parked it; records older than that field count from this start
                since = float(rec.get("suspended_at") or self._clock())
                kind = str(pending.get("kind") or "")
                self._hold(runtime_id, str(rec["id"]), str(pending["id"]), kind, since)
            tally[state] += 1
        self.states[runtime_id] = tally

    def forget(self, runtime_id: str) -> None:
        self.states.pop(runtime_id, None)
        self.open.pop(runtime_id, None)
        self._held.pop(runtime_id, None)

    def apply(self, runtime_id: str, ev: Event) -> None:
        if ev.handle == ROOT_ID:
            return
        tally = self.states.setdefault(runtime_id, Tally())
        if ev.type is EventType.SPAWNED:
            tally[HandleState.IDLE] += 1
        elif ev.type is EventType.TRANSITION and ev.from_state != ev.to_state:
            tally[ev.from_state] = max(0, tally[ev.from_state] - 1)
            tally[ev.to_state] += 1
            if ev.from_state == HandleState.SUSPENDED:
                self._release(runtime_id, ev.handle)
        elif ev.type is EventType.PENDING and ev.pending is not None:
            self._hold(runtime_id, ev.handle, ev.pending.id, ev.pending.kind, self._clock())

    def _hold(self, runtime_id: str, handle: str, request_id: str, kind: str, since: float) -> None:
        self._release(runtime_id, handle)
        requests = self.open.setdefault(runtime_id, {})
        entry = requests.get(request_id)
        if entry is None:
            entry = requests[request_id] = _Open(sys.intern(kind), since)
        entry.holders += 1
        self._held.setdefault(runtime_id, {})[handle] = request_id

    def _release(self, runtime_id: str, handle: str) -> None:
        request_id = self._held.get(runtime_id, {}).pop(handle, None)
        requests = self.open.get(runtime_id, {})
        entry = requests.get(request_id) if request_id is not None else None
        if entry is None or request_id is None:
            return
        entry.holders -= 1
        if entry.holders <= 0:
            del requests[request_id]

    def prune(self, live: set[str]) -> None:
        """Drop runtimes that no longer exist (purged by Shutdown)."""
        for runtime_id in [r for r in self.states if r not in live]:
            self.forget(runtime_id)

    def handle_states(self) -> Tally[str]:
        total: Tally[str] = Tally({str(s): 0 for s in HandleState})
        for tally in self.states.values():
            total.update(tally)
        return total

    def suspensions(self) -> dict[str, tuple[int, float]]:
        """kind -> (open suspensions, age in seconds of the oldest)."""
        now = self._clock()
        out: dict[str, tuple[int, float]] = {}
        for requests in self.open.values():
            for entry in requests.values():
                count, oldest = out.get(entry.kind, (0, 0.0))
                out[entry.kind] = (count + 1, max(oldest, now - entry.since))
        return out


# ---------------------------------------------------------------- scrape-time gauges


class _Live:
    """Gauges read when Prometheus scrapes (on the event loop: see ``api.metrics_http``)."""

    def __init__(self, census: Census, engine: Any, hub: Any) -> None:
        self._census, self._engine, self._hub = census, engine, hub

    def collect(self) -> Iterator[Metric]:
        runtimes = self._engine.runtimes()
        self._census.prune({rt.id for rt in runtimes})
        yield _gauge("toolnexus_runtimes", "Runtimes loaded.", len(runtimes))
        yield _gauge("toolnexus_watchers", "Open Watch streams.", sum(rt.bus.count() for rt in runtimes))
        yield _gauge("toolnexus_workers_connected", "Connect worker streams.", self._hub.count())
        handles = GaugeMetricFamily("toolnexus_handles", "Handles by state (root excluded).",
                                    labels=["state"])
        for state, n in sorted(self._census.handle_states().items()):
            handles.add_metric([state], n)
        yield handles
        yield from _suspension_families(self._census.suspensions())
        yield from _store_families(self._engine.store)


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

    def handle_summaries(self, runtime_id: str) -> Iterator[JSON]:
        return self.inner.handle_summaries(runtime_id)

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
