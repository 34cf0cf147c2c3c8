"""The virtual clock the engine tests run on: timeouts fire when time is advanced, not before."""

from __future__ import annotations

import asyncio
import random
from datetime import UTC, datetime

import pytest

from toolnexus_daemon.clock import ManualClock, rfc3339
from toolnexus_daemon.engine.verbs.runtime import Runtime
from toolnexus_daemon.model import AgentDef, HandleState, Status, ToolDef, ToolResult
from toolnexus_daemon.tools.base import ToolInvocation
from toolnexus_devtools import mock_model

from .conftest import Bench, new_runtime


async def _spin(rounds: int = 20) -> None:
    for _ in range(rounds):
        await asyncio.sleep(0)


async def test_wait_for_times_out_only_once_time_is_advanced() -> None:
    clock = ManualClock()
    never: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    waiting = asyncio.create_task(clock.wait_for(never, 2.0))
    await _spin()
    clock.advance(1.999)
    await _spin()
    assert not waiting.done()
    clock.advance(0.001)
    with pytest.raises(TimeoutError):
        await waiting
    assert never.cancelled(), "what timed out is cancelled, as asyncio.wait_for does"


async def test_wait_for_returns_the_result_in_time() -> None:
    clock = ManualClock()
    fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    waiting = asyncio.create_task(clock.wait_for(fut, 1.0))
    await _spin()
    fut.set_result(7)
    assert await waiting == 7
    clock.advance(5)  # the timer was taken down: nothing left to fire


async def test_wait_done_never_cancels_and_a_cancelled_caller_cancels_the_awaited() -> None:
    clock = ManualClock()
    fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    done = asyncio.create_task(clock.wait_done(fut, 1.0))
    await _spin()
    clock.advance(1.0)
    await done
    assert not fut.done(), "wait_done gives up waiting, it does not cancel"
    inner: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    caller = asyncio.create_task(clock.wait_for(inner, 10.0))
    await _spin()
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    assert inner.cancelled()


async def test_a_tool_deadline_runs_on_the_runtime_clock(bench: Bench) -> None:
    """A tool past its deadline is an error result after exactly the deadline of virtual time."""
    hang = asyncio.Event()

    async def stuck(args: dict, inv: ToolInvocation) -> ToolResult:  # type: ignore[type-arg]
        await hang.wait()
        return ToolResult(output="never")

    agent = AgentDef(name="slow", does="calls a stuck tool",
                     tools=(ToolDef(name="stuck", deadline_ms=30_000),))
    bench.model.script = mock_model
    bench.tools.functions["stuck"] = stuck
    rt: Runtime = await new_runtime(bench, "deadline", agent)
    h = await rt.spawn("root", "slow")
    await rt.wake(h.id, "go")
    waiting = asyncio.create_task(rt.wait(h.id))
    await _spin()
    bench.clock.advance(29.999)
    await _spin()
    assert not waiting.done() and rt.snapshot(h.id).state is HandleState.RUNNING
    bench.clock.advance(0.001)
    result = await waiting
    assert result.status is Status.DONE
    assert result.text == 'tool "stuck" did not finish within its deadline of 30000 ms'


def _reference_rfc3339(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@pytest.mark.parametrize("ts", [0.0, 0.9999996, 1.0000004, 1.9999995, 1_000_000_000.0005,
                                1_764_856_000.999_999_9, 253_402_300_799.999, -0.5, -1_000.25])
def test_rfc3339_matches_datetime_at_the_rounding_edges(ts: float) -> None:
    """The cached-second formatter rounds microseconds half-even like ``datetime.fromtimestamp``
    and truncates to milliseconds; before 1970 and past 9999 it is datetime itself."""
    assert rfc3339(ts) == _reference_rfc3339(ts)


def test_rfc3339_matches_datetime_on_random_times_in_and_out_of_order() -> None:
    """The reused seconds prefix never leaks into another second, whatever order times come in."""
    rng = random.Random(20)
    base = 1_764_856_000.0
    times = [base + rng.uniform(-3, 3) for _ in range(2_000)] + [rng.uniform(0, 4e9) for _ in range(2_000)]
    assert [rfc3339(t) for t in times] == [_reference_rfc3339(t) for t in times]
