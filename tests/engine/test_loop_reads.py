"""The engine reads the store through ``Store.read`` on the paths a call takes: a start (and so a
cluster's take-over, which loads a runtime the same way), a New, and a verb naming a handle parked on
disk together with the registry version it runs. On PostgreSQL a read made around ``Store.read``
holds the event loop — every call of every runtime — for a round trip.

The store records every synchronous read made outside ``Store.read``."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace
from typing import Any, TypeVar

from toolnexus_daemon.clock import SystemClock
from toolnexus_daemon.engine.verbs.engine import Engine
from toolnexus_daemon.model import AgentDef, Answer, LlmConfig, LlmStyle, RuntimeOptions, Status, ToolSource
from toolnexus_daemon.store import MemoryStore, Store
from toolnexus_devtools import mock_model

from .conftest import Bench
from .test_single_level import SECRET, secret_action

T = TypeVar("T")
READS = frozenset({"runtime_ids", "get_runtime", "handles", "handles_to_recover", "census", "pending",
                   "expiring", "get_handle", "get_handles", "messages", "get_checkpoint", "get_request",
                   "get_version", "versions", "events", "last_seq"})
LLM = LlmConfig(style=LlmStyle.WORKER)


class DirectReads(MemoryStore):
    """Records the name of every synchronous read made directly, not inside ``Store.read``."""

    def __init__(self) -> None:
        super().__init__()
        self.direct: list[str] = []
        self.inside = 0

    async def read(self, work: Callable[[Store], T]) -> T:
        self.inside += 1
        try:
            return await super().read(work)
        finally:
            self.inside -= 1

    def __getattribute__(self, name: str) -> Any:
        if name in READS and not object.__getattribute__(self, "inside"):
            object.__getattribute__(self, "direct").append(name)
        return super().__getattribute__(name)


def _engine(store: Store, bench: Bench, **options: Any) -> Engine:
    return Engine(store, clock=SystemClock(), model_for=lambda llm: bench.model,
                  executors={ToolSource.NATIVE: bench.tools}, **options)


async def _started(store: Store, bench: Bench, rid: str, **options: Any) -> Engine:
    """An engine on ``store``, started, with runtime ``rid`` of the agent whose tool suspends."""
    bench.model.script = mock_model
    bench.tools.functions["secret_action"] = secret_action
    engine = _engine(store, bench, **options)
    await engine.start()
    try:
        await engine.new(rid, [SECRET], LLM, RuntimeOptions())
    except BaseException:
        await engine.stop()
        raise
    return engine


async def _parked(engine: Engine, rid: str) -> tuple[str, str]:
    """A handle of ``rid`` suspended on an approval: (handle, request id)."""
    rt = engine.runtime(rid)
    h = await rt.spawn("root", "secret")
    await rt.wake(h.id, "go")
    result = await rt.wait(h.id, 5000)
    assert result.status is Status.PENDING and result.pending is not None
    return h.id, result.pending.id


async def test_a_start_and_a_new_read_the_store_only_through_store_read(bench: Bench) -> None:
    store = DirectReads()
    bench.model.script = mock_model
    bench.tools.functions["secret_action"] = secret_action
    first = _engine(store, bench)
    await first.start()
    await first.new("kept", [SECRET], LLM, RuntimeOptions())
    handle, _ = await _parked(first, "kept")
    await first.stop()

    store.direct.clear()
    again = _engine(store, bench)
    try:
        assert await again.start() == 0
        await again.new("fresh", [SECRET], LLM, RuntimeOptions())
        await again.new("kept", [SECRET], LLM, RuntimeOptions())  # a reattach
        await again.settle_background()
        assert store.direct == [], "read around Store.read (on PostgreSQL: the event loop held)"
        rt = again.runtime("kept")
        assert rt.table.peek(handle) is None, "parked on disk after the restart"
        await rt.fetch(handle)  # what Snapshot and Watch do before their synchronous lookup
        assert rt.snapshot(handle).state.value == "suspended"
        assert store.direct == []
    finally:
        await again.stop()


async def test_a_resume_reads_the_version_its_parked_handle_runs_through_store_read(bench: Bench) -> None:
    store = DirectReads()
    bench.model.script = mock_model
    bench.tools.functions["secret_action"] = secret_action
    first = _engine(store, bench)
    await first.start()
    await first.new("pinned", [SECRET], LLM, RuntimeOptions())
    handle, request_id = await _parked(first, "pinned")
    changed: AgentDef = replace(SECRET, soul="a newer soul")
    assert (await first.new("pinned", [changed], LLM, RuntimeOptions())).version.number == 2
    await first.settle_background()
    await first.stop()

    again = _engine(store, bench)
    await again.start()
    try:
        rt = again.runtime("pinned")
        store.direct.clear()
        outcome = await rt.resume(Answer(request_id, ok=True), handle)
        assert outcome.result is not None and outcome.result.status is Status.DONE
        assert rt.snapshot(handle).version == 1, "the handle ran the version it was pinned to"
        assert store.direct == [], "read around Store.read (on PostgreSQL: the event loop held)"
    finally:
        await again.stop()


class HeldRead(MemoryStore):
    """``Store.read`` as the memory store does it, except that the first one after ``hold()`` waits
    for ``release``: a read on its way to a slow database while the event loop serves others."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()
        self.held = asyncio.Event()
        self._arm = False

    def hold(self) -> None:
        self._arm = True

    async def read(self, work: Callable[[Store], T]) -> T:
        if self._arm:
            self._arm = False
            self.held.set()
            await self.release.wait()
        return await super().read(work)


async def test_a_close_whose_request_is_answered_while_it_reads_closes_what_the_handle_became(
        bench: Bench) -> None:
    """Close reads the suspended handle's request entry off the loop before cancelling it; an
    answer accepted meanwhile runs the handle on. The close then closes the handle as it is now
    (its transition from the state it is in), instead of cancelling a request no longer open."""
    store = HeldRead()
    engine = await _started(store, bench, "race")
    try:
        rt = engine.runtime("race")
        handle, request_id = await _parked(engine, "race")
        rt.table.held.clear()  # the entry not held (evicted, or a restart since): Close reads the store
        store.hold()
        closing = asyncio.ensure_future(rt.close(handle))
        await asyncio.wait_for(store.held.wait(), 5)  # the close waits on its read of the entry
        outcome = await rt.resume(Answer(request_id, ok=True), handle)
        assert outcome.result is not None and outcome.result.status is Status.DONE
        store.release.set()
        await asyncio.wait_for(closing, 5)
        closed = [e for e in store.events(rt.id, 0, 10_000) if e.handle == handle and e.to_state == "closed"]
        assert [e.from_state for e in closed] == ["idle"], "closed from the state the handle was in"
        entry = rt.requests.get(request_id)
        assert entry is not None and not any(w.state.value == "cancelled" for w in entry.waits.values())
    finally:
        await engine.stop()


class CountedReads(MemoryStore):
    """Counts every read of a request entry and of a handle's transcript, inside ``Store.read`` or not."""

    def __init__(self) -> None:
        super().__init__()
        self.counted: list[str] = []

    def get_request(self, runtime_id: str, request_id: str) -> Any:
        self.counted.append("get_request")
        return super().get_request(runtime_id, request_id)

    def messages(self, runtime_id: str, handle_id: str, start: int = 0, end: int | None = None) -> Any:
        if "#" not in handle_id:  # not a children log
            self.counted.append("messages")
        return super().messages(runtime_id, handle_id, start, end)


async def test_a_resume_by_the_owner_that_suspended_reads_neither_the_entry_nor_the_transcript(
        bench: Bench) -> None:
    """The suspension's entry and every message of the transcript were committed by this owner
    (``state.held``): the Resume and the turn it continues read none of them from the store — on
    PostgreSQL a round trip each. After a restart nothing is held, and the same Resume reads both."""
    store = CountedReads()
    engine = await _started(store, bench, "held")
    try:
        rt = engine.runtime("held")
        first, first_request = await _parked(engine, "held")
        second, second_request = await _parked(engine, "held")
        store.counted.clear()
        outcome = await rt.resume(Answer(first_request, ok=True), first)
        assert outcome.result is not None and outcome.result.status is Status.DONE
        assert store.counted == []
        sent = bench.model.bodies[-1]["messages"]
        assert sent == store.messages("held", first)[:len(sent)], "what was sent is what the store holds"
    finally:
        await engine.stop()

    again = _engine(store, bench)
    await again.start()
    try:
        store.counted.clear()
        outcome = await again.runtime("held").resume(Answer(second_request, ok=True), second)
        assert outcome.result is not None and outcome.result.status is Status.DONE
        assert "get_request" in store.counted and "messages" in store.counted
    finally:
        await again.stop()


async def test_an_engine_that_holds_nothing_reads_the_entry_and_the_transcript_on_resume(
        bench: Bench) -> None:
    """``held_bytes=0`` (``--held-memory 0``): nothing is held, so the same owner's Resume reads both."""
    store = CountedReads()
    engine = await _started(store, bench, "bare", held_bytes=0)
    try:
        handle, request_id = await _parked(engine, "bare")
        store.counted.clear()
        outcome = await engine.runtime("bare").resume(Answer(request_id, ok=True), handle)
        assert outcome.result is not None and outcome.result.status is Status.DONE
        assert "get_request" in store.counted and "messages" in store.counted
        assert engine.held.total == 0
    finally:
        await engine.stop()
