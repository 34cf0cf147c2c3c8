"""One runtime's commits: grouped while the store is busy, in order, gapless, failing alone."""

from __future__ import annotations

import asyncio

import pytest

from toolnexus_daemon.clock import SystemClock
from toolnexus_daemon.engine.change import Change
from toolnexus_daemon.engine.engine import Engine
from toolnexus_daemon.errors import StoreFull
from toolnexus_daemon.model import AgentDef, EventType, LlmConfig, LlmStyle, RuntimeOptions
from toolnexus_daemon.store import Batch, MemoryStore


class CountingStore(MemoryStore):
    """Counts transactions and refuses any batch carrying a ``poison`` event, as a full map would."""

    def __init__(self) -> None:
        super().__init__()
        self.transactions = 0

    async def commit(self, batch: Batch) -> None:
        if any(e.note == "poison" for e in batch.events):
            raise StoreFull("map full (test)")
        self.transactions += 1
        await super().commit(batch)


async def _runtime(store: CountingStore):  # type: ignore[no-untyped-def]
    engine = Engine(store, clock=SystemClock(), model_for=lambda llm: None,  # type: ignore[arg-type,return-value]
                    executors={})
    await engine.new("c", [AgentDef(name="a")], LlmConfig(style=LlmStyle.WORKER), RuntimeOptions())
    return engine.runtime("c")


def _note(rt, text: str) -> Change:  # type: ignore[no-untyped-def]
    return Change().event(rt.table.handle("root"), EventType.POST, text)


async def test_concurrent_changes_share_transactions_and_keep_their_order() -> None:
    store = CountingStore()
    rt = await _runtime(store)
    before = store.transactions
    await asyncio.gather(*(rt.commit(_note(rt, f"n{i}")) for i in range(50)))
    assert store.transactions - before < 50, "changes queued behind a commit go down together"
    notes = [e.note for e in store.events("c", 0, 1000) if e.note.startswith("n")]
    assert notes == [f"n{i}" for i in range(50)]


async def test_a_refused_change_fails_alone_and_seqs_stay_gapless() -> None:
    store = CountingStore()
    rt = await _runtime(store)
    results = await asyncio.gather(rt.commit(_note(rt, "a")), rt.commit(_note(rt, "poison")),
                                   rt.commit(_note(rt, "b")), return_exceptions=True)
    assert results[0] is None and results[2] is None
    assert isinstance(results[1], StoreFull)
    events = store.events("c", 0, 1000)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert [e.note for e in events][-2:] == ["a", "b"]
    with pytest.raises(StoreFull):
        await rt.commit(_note(rt, "poison"))
    assert rt.last_seq() == events[-1].seq
