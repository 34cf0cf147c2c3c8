"""The one place a commit can be refused before the store sees it (the cluster's lease check)."""

from __future__ import annotations

import pytest

from toolnexus_daemon.clock import ManualClock
from toolnexus_daemon.engine.runtime import Runtime, RuntimeDeps
from toolnexus_daemon.errors import LeaseLost
from toolnexus_daemon.model import ROOT_ID, InboxItem, LlmConfig, LlmStyle, RuntimeOptions
from toolnexus_daemon.store import Batch, MemoryStore

from .conftest import ScriptedModel


class Switch:
    """A CommitGuard that refuses once told to, and records what it was asked."""

    def __init__(self) -> None:
        self.refuse = False
        self.asked: list[tuple[str, int]] = []

    def check(self, runtime_id: str, batch: Batch) -> None:
        self.asked.append((runtime_id, len(batch.events)))
        if self.refuse:
            raise LeaseLost("the lease moved to another daemon (test)")


async def test_a_refusing_guard_fails_the_commit_and_nothing_reaches_the_store() -> None:
    store, guard = MemoryStore(), Switch()
    deps = RuntimeDeps(store=store, clock=ManualClock(), model=ScriptedModel(script=lambda body: {}),
                       executors={}, guard=guard)
    rt = Runtime("g", [], LlmConfig(style=LlmStyle.WORKER), RuntimeOptions(), deps, created_at=0.0)
    await rt.create_root()
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
