"""The one place a commit is made conditional (the cluster's lease check): asked for every runtime
of every transaction, and a refusal fails only the changes of the runtime it refused."""

from __future__ import annotations

import asyncio

import pytest

from tests.engine.test_fused_wake import CountingStore
from toolnexus_daemon.clock import ManualClock
from toolnexus_daemon.engine.commit.committer import Committer
from toolnexus_daemon.engine.state.change import Change
from toolnexus_daemon.engine.verbs.runtime import Runtime, RuntimeDeps
from toolnexus_daemon.errors import LeaseLost, StoreError
from toolnexus_daemon.model import ROOT_ID, EventType, InboxItem, LlmConfig, LlmStyle, RuntimeOptions
from toolnexus_daemon.store import Batch, MemoryStore

from .conftest import ScriptedModel


class Switch:
    """A CommitGuard that refuses once told to, and records what it was asked and told."""

    def __init__(self) -> None:
        self.refuse = False
        self.asked: list[tuple[str, int]] = []
        self.refusals: list[tuple[str, str]] = []

    def check(self, runtime_id: str, batch: Batch) -> None:
        self.asked.append((runtime_id, len(batch.events)))
        if self.refuse:
            raise LeaseLost("the lease moved to another daemon (test)")

    def refused(self, runtime_id: str, error: StoreError) -> None:
        self.refusals.append((runtime_id, type(error).__name__))

    def act(self, runtime_id: str) -> None:
        return None


async def _runtime(rid: str, store: MemoryStore, committer: Committer, guard: Switch) -> Runtime:
    deps = RuntimeDeps(store=store, clock=ManualClock(), model=ScriptedModel(script=lambda body: {}),
                       executors={}, committer=committer, guard=guard)
    rt = Runtime(rid, [], LlmConfig(style=LlmStyle.WORKER), RuntimeOptions(), deps, created_at=0.0)
    await rt.create_root()
    return rt


def _note(rt: Runtime, text: str) -> Change:
    return Change().event(rt.table.handle(ROOT_ID), EventType.POST, text)


async def test_a_refusing_guard_fails_the_commit_and_nothing_reaches_the_store() -> None:
    store, guard = MemoryStore(), Switch()
    rt = await _runtime("g", store, Committer(store), guard)
    assert guard.asked and guard.asked[0][0] == "g", "every transaction passes the guard"
    before = rt.last_seq()
    await rt.post(ROOT_ID, InboxItem(from_="app", channel="", text="allowed"))
    assert rt.last_seq() == before + 1 and len(store.events("g", 0, 100)) == before + 1
    guard.refuse = True
    with pytest.raises(LeaseLost):
        await rt.post(ROOT_ID, InboxItem(from_="app", channel="", text="refused"))
    assert [i.text for i in rt.table.handle(ROOT_ID).inbox] == ["allowed"], "memory reloaded from the store"
    assert rt.last_seq() == before + 1 and len(store.events("g", 0, 100)) == before + 1
    assert [i["text"] for i in store.get_handle("g", ROOT_ID)["inbox"]] == ["allowed"]  # type: ignore[index]
    assert guard.refusals == [("g", "LeaseLost")], "the guard hears of its refused change"


async def test_in_a_mixed_group_a_refusal_fails_only_the_changes_of_the_refused_runtime() -> None:
    """Three runtimes share a transaction; one's guard refuses: the group fails, each change is
    retried alone, and only that runtime's changes fail — the others land, every seq gapless."""
    store = CountingStore()
    committer = Committer(store)
    guards = {rid: Switch() for rid in ("a", "lost", "c")}
    rts = {rid: await _runtime(rid, store, committer, guard) for rid, guard in guards.items()}
    guards["lost"].refuse = True
    before = store.transactions
    order = ["a", "lost", "c", "lost", "a", "c"]
    commits = (rts[rid].commit(_note(rts[rid], f"{rid}{i}")) for i, rid in enumerate(order))
    results = await asyncio.gather(*commits, return_exceptions=True)
    refused = [rid for rid, r in zip(order, results, strict=True) if isinstance(r, LeaseLost)]
    assert refused == ["lost", "lost"]
    assert all(r is None for rid, r in zip(order, results, strict=True) if rid != "lost")
    assert store.transactions - before == 4, "refused whole, then its four good changes landed alone"
    assert guards["lost"].refusals == [("lost", "LeaseLost")] * 2 and not guards["a"].refusals
    assert [(g, n) for g, n in guards["a"].asked[-3:]] == [("a", 2), ("a", 1), ("a", 1)], \
        "asked with the runtime's own part of each transaction"
    for rid in ("a", "c"):
        events = store.events(rid)
        assert [e.seq for e in events] == [1, 2] and rts[rid].last_seq() == 2
        assert [e.note for e in events] == [f"{rid}{i}" for i, r in enumerate(order) if r == rid]
    assert store.events("lost") == [] and rts["lost"].last_seq() == 0


async def test_a_refused_commit_nobody_awaits_leaves_no_unretrieved_error(
        caplog: pytest.LogCaptureFixture) -> None:
    """Before: a turn stopped while its commit was queued (a runtime given up in a cluster) left the
    commit's future unawaited; its refusal (LeaseLost) was logged at shutdown as "Future exception
    was never retrieved"."""
    import gc

    store, guard = MemoryStore(), Switch()
    committer = Committer(store)
    rt = await _runtime("u", store, committer, guard)
    guard.refuse = True
    done = committer.submit(rt._log, _note(rt, "refused, and nobody waits"))
    await asyncio.wait([done])
    assert isinstance(done.exception(), LeaseLost)  # a caller that does await still hears the refusal
    del done
    await asyncio.wait([committer.submit(rt._log, _note(rt, "refused, never awaited"))])  # not retrieved
    guard.refuse = False
    await committer.submit(rt._log, _note(rt, "allowed"))  # the refused one is done, and referenced no more
    gc.collect()
    assert "never retrieved" not in caplog.text
