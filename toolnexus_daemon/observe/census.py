"""What the metrics read from the rest of the daemon, as typed protocols.

The observability package sits beside the engine, not inside it: it must never
import the engine or the worker hub (the engine would then be one import away
from ``prometheus_client``), yet the scrape-time gauges need the loaded
runtimes, their watcher counts, the connected workers, the commit counts
and the store's counts. These protocols name exactly the methods a scrape calls; the engine
and the hub satisfy them structurally, and mypy checks that they do where
``app`` binds them (``Metrics.bind``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from ..store.base import HandleCensus, StoreInfo


class Identified(Protocol):
    """A runtime as the commit observer sees it: its id labels nothing, but keys the log lines."""

    @property
    def id(self) -> str: ...


class WatcherCount(Protocol):
    """A runtime's event bus: how many Watch streams are open on it."""

    def count(self) -> int: ...


class LoadedRuntime(Protocol):
    """One loaded runtime: its id (for the store's census) and its bus (for the watcher gauge)."""

    @property
    def id(self) -> str: ...

    @property
    def bus(self) -> WatcherCount: ...


class CensusStore(Protocol):
    """The store reads a scrape makes: durable handle counts per runtime and the map's size."""

    def census(self, runtime_id: str) -> HandleCensus: ...

    def info(self) -> StoreInfo: ...


class CommitCounts(Protocol):
    """The engine committer's totals so far (``engine.committer.CommitStats``): changes committed
    and the write transactions they shared, whatever the store."""

    @property
    def batches(self) -> int: ...

    @property
    def transactions(self) -> int: ...


class HeldSize(Protocol):
    """What the engine holds of its own commits (``engine.state.held.HeldBudget``), in bytes as
    encoded, and its bound (``--held-memory``)."""

    @property
    def total(self) -> int: ...

    @property
    def max_bytes(self) -> int: ...

    @property
    def reads(self) -> Mapping[tuple[str, bool], int]:
        """Reads so far by (record, whether it was held): record is "transcript" or "request"."""
        ...


class RuntimeCensus(Protocol):
    """The engine, as the metrics see it: the runtimes loaded now and the store behind them."""

    def runtimes(self) -> Sequence[LoadedRuntime]: ...

    def commit_stats(self) -> CommitCounts: ...

    @property
    def held(self) -> HeldSize: ...

    @property
    def store(self) -> CensusStore: ...


class WorkerCensus(Protocol):
    """The worker hub, as the metrics see it: how many Connect streams are open."""

    def count(self) -> int: ...
