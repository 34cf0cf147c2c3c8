"""Prometheus metrics of the daemon: what the engine commits, what the store costs, who is connected.

Counters and histograms are fed by the engine's observer (``observe``: called
after every commit with its events, so a metric never counts work that was
not durable), by ``TimedStore`` (commit latency and size) and by the servicer
(resume outcomes, which only ``Resume`` can tell apart). Gauges are read at
scrape time by ``observe.scrape.LiveGauges`` from the engine and the worker hub,
read through the typed protocols of ``observe.census``. Everything lives in one
private registry, so tests and a second daemon in one process never share
state.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from .. import __version__
from ..model import Event, EventType
from ..store.base import Store
from .census import Identified, RuntimeCensus, WorkerCensus
from .scrape import LiveGauges
from .timed_store import TimedStore

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
        # the labelled children the observer feeds after every commit, looked up once each:
        # ``labels()`` takes a lock and builds a key every time (about a dozen events per turn)
        self._prompt_tokens = self.tokens.labels("prompt")
        self._completion_tokens = self.tokens.labels("completion")
        self._by_type: dict[EventType, Counter] = {}
        self._by_tool: dict[tuple[str, str], Counter] = {}
        self._tool_latency: dict[str, Histogram] = {}

    def bind(self, engine: RuntimeCensus, hub: WorkerCensus) -> None:
        """Read runtimes, watchers, workers and the store at scrape time from these."""
        self.registry.register(LiveGauges(engine, hub, self._clock))

    def resume_outcome(self, outcome: str) -> None:
        self.resumes.labels(outcome).inc()

    def observe(self, rt: Identified, events: list[Event]) -> None:
        """The engine's observer: never raises, never blocks (it runs under the commit lock)."""
        try:
            for ev in events:
                self._count(rt.id, ev)
        except Exception:
            if not self._observer_failed:  # once: a bug here must not flood the log on every commit
                self._observer_failed = True
                log.exception("metrics observer failed; some metrics may be off")

    def _count(self, runtime_id: str, ev: Event) -> None:
        counter = self._by_type.get(ev.type)
        if counter is None:
            counter = self._by_type[ev.type] = self.events.labels(str(ev.type))
        counter.inc()
        if ev.type is EventType.MODEL_CALL:
            data = ev.data or {}
            usage = data.get("usage") or {}
            self.model_calls.inc()
            self.model_latency.observe(float(data.get("latency_ms") or 0) / 1000)
            self._prompt_tokens.inc(max(0, int(usage.get("prompt_tokens") or 0)))
            self._completion_tokens.inc(max(0, int(usage.get("completion_tokens") or 0)))
            if usage.get("estimated"):
                self.tokens_estimated.inc(max(0, int(usage.get("total_tokens") or 0)))
        elif ev.type is EventType.TOOL_RESULT:
            data = ev.data or {}
            source = str(data.get("source") or "unknown")
            key = (source, str(data.get("outcome") or "ok"))
            calls = self._by_tool.get(key)
            if calls is None:
                calls = self._by_tool[key] = self.tool_calls.labels(*key)
            calls.inc()
            latency = self._tool_latency.get(source)
            if latency is None:
                latency = self._tool_latency[source] = self.tool_latency.labels(source)
            latency.observe(float(data.get("latency_ms") or 0) / 1000)

    def instrument(self, store: Store) -> TimedStore:
        """``store`` with each commit timed and sized into this registry's histograms."""
        return TimedStore(store, self.commit_latency, self.commit_records)
