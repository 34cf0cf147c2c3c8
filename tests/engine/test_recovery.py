"""Resume and a crash: the re-invoked call is announced by the acceptance's commit, and a restart
before its result re-dispatches it with that same call_id (workers may deduplicate on it)."""

from __future__ import annotations

import asyncio

from toolnexus_daemon.clock import SystemClock
from toolnexus_daemon.engine.verbs.engine import Engine
from toolnexus_daemon.model import Answer, EventType, HandleState, Request, Status, ToolResult, ToolSource
from toolnexus_daemon.store import Batch
from toolnexus_daemon.tools.base import ToolInvocation
from toolnexus_devtools import mock_model

from .conftest import Bench, new_runtime
from .test_single_level import SECRET


class CountingCommits:
    """Wraps a store's commit to count the commits made while ``counting``."""

    def __init__(self, store: object) -> None:
        self.count = 0
        self.counting = False
        inner = store.commit  # type: ignore[attr-defined]

        async def commit(batch: Batch) -> None:
            self.count += self.counting
            await inner(batch)

        store.commit = commit  # type: ignore[attr-defined]


async def test_a_crash_after_resume_redispatches_the_reinvoked_call_with_its_call_id(bench: Bench) -> None:
    dispatched = asyncio.Event()
    never = asyncio.Event()

    async def approval(args: dict, inv: ToolInvocation) -> ToolResult:  # type: ignore[type-arg]
        if inv.answer is None:
            return ToolResult(output="", pending=Request(id="", kind="approval", prompt="approve?"))
        dispatched.set()
        await never.wait()  # in flight when the daemon goes down
        return ToolResult(output="unreachable")

    bench.model.script = mock_model
    bench.tools.functions["secret_action"] = approval
    commits = CountingCommits(bench.store)
    rt = await new_runtime(bench, "crash", SECRET)
    h = await rt.spawn("root", "secret")
    await rt.wake(h.id, "do it")
    pending = await rt.wait(h.id, 5000)
    assert pending.status is Status.PENDING and pending.pending is not None

    commits.counting = True
    await rt.resume(Answer(pending.pending.id, ok=True), no_wait=True)
    await asyncio.wait_for(dispatched.wait(), 5)
    assert commits.count == 1, "the acceptance's commit alone precedes the re-invoked call's dispatch"
    call_id = bench.tools.ledger[-1].call_id
    announced = [e.data["call_id"] for e in bench.store.events("crash", 0, 1000)
                 if e.type is EventType.TOOL_CALL and e.data]
    assert announced[-1] == call_id and call_id != bench.tools.ledger[0].call_id

    await bench.engine.stop()  # as a kill: the turn stops at its last commit
    bench.tools.functions["secret_action"] = lambda args, inv: ToolResult(output="action performed")
    again = Engine(bench.store, clock=SystemClock(), model_for=lambda llm: bench.model,
                   executors={ToolSource.NATIVE: bench.tools})
    assert await again.start() == 1
    try:
        done = await again.runtime("crash").wait(h.id, 5000)
        assert (done.status, done.text) == (Status.DONE, "action performed")
        assert bench.tools.ledger[-1].call_id == call_id, "re-dispatched with the same call_id"
        assert again.runtime("crash").snapshot(h.id).state is HandleState.IDLE
    finally:
        await again.stop()
