"""The ``Store`` protocol around another store, timing and sizing each commit for the metrics.

The engine commits through this wrapper without knowing it is measured: it
sees a ``Store``. Only a durable commit is counted (the timing stops after
``commit`` returns), so the latency histogram is the time to a synced write.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from prometheus_client import Histogram

from ..model import JSON, Event
from ..store.base import Batch, HandleCensus, HandleKey, PendingQuery, PendingRow, Store, StoreInfo

T = TypeVar("T")


class TimedStore:
    """The ``Store`` protocol around another store, timing and sizing each commit."""

    def __init__(self, inner: Store, latency: Histogram, records: Histogram) -> None:
        self.inner = inner
        self._latency, self._records = latency, records

    @property
    def commit_lanes(self) -> int:
        return self.inner.commit_lanes

    async def commit(self, batch: Batch, lane: int = 0) -> None:
        started = time.perf_counter()
        await self.inner.commit(batch, lane)
        self._latency.observe(time.perf_counter() - started)
        self._records.observe(batch_records(batch))

    async def read(self, work: Callable[[Store], T]) -> T:
        # the inner store's reads (on its reader threads, if it has them) answered through this one
        return await self.inner.read(lambda _: work(self))

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

    def pending(self, query: PendingQuery) -> list[PendingRow]:
        return self.inner.pending(query)
    def expiring(self, runtime_id: str, limit: int) -> list[tuple[float, str]]:
        return self.inner.expiring(runtime_id, limit)

    def get_handle(self, runtime_id: str, handle_id: str) -> JSON | None:
        return self.inner.get_handle(runtime_id, handle_id)

    def get_handles(self, keys: list[HandleKey]) -> list[JSON | None]:
        return self.inner.get_handles(keys)

    def messages(self, runtime_id: str, handle_id: str, start: int = 0, end: int | None = None) -> list[JSON]:
        return self.inner.messages(runtime_id, handle_id, start, end)

    def get_checkpoint(self, runtime_id: str, handle_id: str) -> JSON | None:
        return self.inner.get_checkpoint(runtime_id, handle_id)

    def get_request(self, runtime_id: str, request_id: str) -> JSON | None:
        return self.inner.get_request(runtime_id, request_id)

    def get_version(self, runtime_id: str, version_key: str) -> JSON | None:
        return self.inner.get_version(runtime_id, version_key)

    def versions(self, runtime_id: str) -> list[JSON]:
        return self.inner.versions(runtime_id)

    def events(self, runtime_id: str, after_seq: int = 0, limit: int = 1000,
               max_bytes: int | None = None) -> list[Event]:
        return self.inner.events(runtime_id, after_seq, limit, max_bytes)

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
            + len(batch.checkpoints) + len(batch.requests) + len(batch.versions) + len(batch.events)
            + len(batch.purge))
