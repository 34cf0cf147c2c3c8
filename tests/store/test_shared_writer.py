"""The writer LMDB and PostgreSQL share (``store/writer.py``), over a backend of its own: each lane
applies its batches one transaction each in call order, a backend that refuses commits or cannot
describe a failure still answers the caller, and closing writes what was queued.

The LMDB and PostgreSQL backends are covered through their stores (test_writer.py, test_pg.py and
the contract suite); this backend keeps a list per lane, so what the writer itself promises is
visible without either driver."""

from __future__ import annotations

import asyncio
import threading

import pytest

from toolnexus_daemon.errors import StoreError, StoreUnavailable
from toolnexus_daemon.store import Batch
from toolnexus_daemon.store.writer import Writer


class ListBackend:
    """A backend whose transaction appends a batch's runtime ids to its lane's list."""

    def __init__(self, lanes: int) -> None:
        self.written: list[list[str]] = [[] for _ in range(lanes)]
        self.threads: set[str] = set()
        self.down = False
        self.fail_on = ""  # a runtime id whose transaction fails
        self.describe_fails = False
        self.gate = threading.Event()
        self.gate.set()

    def prepare(self, batch: Batch) -> list[str]:
        return list(batch.runtimes)

    def admit(self) -> None:
        if self.down:
            raise StoreUnavailable("the test database is down")

    def transact(self, lane: int, ops: list[str]) -> None:
        self.gate.wait(5)
        self.threads.add(threading.current_thread().name)
        if self.fail_on in ops:
            raise RuntimeError(f"transaction of {self.fail_on} failed")
        self.written[lane].extend(ops)

    def failed(self, exc: Exception) -> Exception:
        if self.describe_fails:
            raise ValueError("cannot describe it")
        return StoreError(f"described: {exc}")


def batch(*rids: str) -> Batch:
    return Batch(runtimes={rid: {} for rid in rids})


async def test_each_lane_writes_in_call_order_on_its_own_thread() -> None:
    backend = ListBackend(3)
    writer = Writer(backend, where="test", lanes=3, name="t-commit")
    try:
        await asyncio.gather(*(writer.commit(batch(f"r{i}"), lane=i % 4) for i in range(24)))
        # lane 3 wraps to lane 0
        assert backend.written[0] == [f"r{i}" for i in range(24) if i % 4 in (0, 3)]
        assert backend.written[1] == [f"r{i}" for i in range(24) if i % 4 == 1]
        assert backend.written[2] == [f"r{i}" for i in range(24) if i % 4 == 2]
        assert backend.threads == {"t-commit-0", "t-commit-1", "t-commit-2"}
        assert (writer.stats().transactions, writer.stats().failed, writer.lanes) == (24, 0, 3)
    finally:
        writer.close()


async def test_an_empty_batch_is_no_transaction_and_a_refused_one_is_never_queued() -> None:
    backend = ListBackend(1)
    writer = Writer(backend, where="test")
    try:
        await writer.commit(Batch())
        backend.down = True
        with pytest.raises(StoreUnavailable, match="down"):
            await writer.commit(batch("r1"))
        assert writer.stats().transactions == 0 and backend.written == [[]]
    finally:
        writer.close()


async def test_a_failure_the_backend_cannot_describe_still_answers_and_the_lane_goes_on() -> None:
    backend = ListBackend(1)
    writer = Writer(backend, where="test")
    try:
        backend.fail_on = "bad"
        with pytest.raises(StoreError, match="described: transaction of bad failed"):
            await writer.commit(batch("bad"))
        backend.describe_fails = True
        with pytest.raises(StoreError, match="describing it failed"):
            await writer.commit(batch("bad"))
        await writer.commit(batch("good"))
        assert backend.written == [["good"]] and writer.stats().failed == 2
    finally:
        writer.close()


async def test_closing_writes_what_was_queued_then_refuses() -> None:
    backend = ListBackend(1)
    writer = Writer(backend, where="the test store")
    backend.gate.clear()  # the first transaction waits, so the rest queue behind it
    queued = [asyncio.create_task(writer.commit(batch(f"r{i}"))) for i in range(5)]
    await asyncio.sleep(0)
    closing = asyncio.get_running_loop().run_in_executor(None, writer.close)
    backend.gate.set()
    await closing
    await asyncio.gather(*queued)
    assert backend.written == [[f"r{i}" for i in range(5)]]
    with pytest.raises(StoreError, match="store the test store is closed"):
        await writer.commit(batch("late"))
