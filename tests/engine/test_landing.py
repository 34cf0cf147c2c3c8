"""The model is asked while the commit before it syncs (``engine/commit/landing.py``), and
nothing that depends on that commit happens before it is durable; a refused commit still fails
exactly what it failed before (the Wake, or the turn)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from tests.engine.conftest import FunctionTools
from toolnexus_daemon.clock import SystemClock
from toolnexus_daemon.engine.state.handle import Handle
from toolnexus_daemon.engine.state.held import HeldBudget, HeldRecords
from toolnexus_daemon.engine.verbs.engine import Engine
from toolnexus_daemon.engine.verbs.runtime import Runtime
from toolnexus_daemon.errors import StoreFull
from toolnexus_daemon.llm.base import ModelReply, ModelRequest, reply_from_openai
from toolnexus_daemon.model import (
    JSON,
    AgentDef,
    EventType,
    HandleState,
    LlmConfig,
    LlmStyle,
    RuntimeOptions,
    Status,
    ToolDef,
    ToolResult,
    ToolSource,
)
from toolnexus_daemon.store import Batch, MemoryStore
from toolnexus_devtools import mock_model


class HeldStore(MemoryStore):
    """A store whose commits can be held (a sync that takes its time) or refused, batch by batch."""

    def __init__(self) -> None:
        super().__init__()
        self.hold: asyncio.Event | None = None
        self.refuse: Callable[[Batch], bool] = lambda batch: False
        self.written: list[list[EventType]] = []

    async def commit(self, batch: Batch) -> None:
        if self.hold is not None:
            await self.hold.wait()
        if self.refuse(batch):
            raise StoreFull("the map is full (test)")
        await super().commit(batch)
        self.written.append([e.type for e in batch.events])


class RecordingModel:
    """The reference mock (call the first tool, then answer with its output); records each body
    with what the store had written when it was asked."""

    def __init__(self, store: HeldStore) -> None:
        self.store = store
        self.asked: list[tuple[JSON, int]] = []

    async def complete(self, request: ModelRequest) -> ModelReply:
        self.asked.append((request.body, len(self.store.written)))
        await asyncio.sleep(0)
        return reply_from_openai(mock_model(request.body))

    async def aclose(self) -> None:
        return None


async def _runtime(store: HeldStore, model: RecordingModel, tools: FunctionTools) -> Runtime:
    engine = Engine(store, clock=SystemClock(), model_for=lambda llm: model,
                    executors={ToolSource.NATIVE: tools})
    agent = AgentDef(name="a", tools=(ToolDef(name="act"),))
    await engine.new("l", [agent], LlmConfig(style=LlmStyle.WORKER), RuntimeOptions())
    return engine.runtime("l")


def _tools() -> FunctionTools:
    return FunctionTools({"act": lambda args, inv: ToolResult(output="acted")})


def _contents(body: JSON) -> list[tuple[str, str]]:
    return [(str(m["role"]), str(m.get("content") or "")) for m in body["messages"]]


async def test_the_model_is_asked_while_the_wake_syncs_and_its_reply_waits_for_it() -> None:
    store = HeldStore()
    model = RecordingModel(store)
    rt = await _runtime(store, model, _tools())
    h = await rt.spawn("root", "a")
    store.hold = asyncio.Event()
    wake = asyncio.ensure_future(rt.wake(h.id, "go"))
    while not model.asked:
        await asyncio.sleep(0.001)
    body, written = model.asked[0]
    assert written == len(store.written)  # the wake's commit had not landed when the model was asked
    assert _contents(body)[-1] == ("user", "go")  # the prompt came from the wake's own change
    await asyncio.sleep(0.05)
    assert not wake.done() and len(model.asked) == 1  # the reply's tool call waits for the wake
    store.hold.set()
    assert await wake is False
    assert (await rt.wait(h.id, 5000)).status is Status.DONE


async def _one_turn(rt: Runtime) -> Handle:
    """A handle of agent ``a`` spawned, woken with "go" and run to ``done`` (tool step, then answer)."""
    h = await rt.spawn("root", "a")
    assert await rt.wake(h.id, "go") is False
    assert (await rt.wait(h.id, 5000)).status is Status.DONE
    return h


async def test_tool_results_sync_beside_the_next_model_call_and_land_before_its_reply() -> None:
    store = HeldStore()
    model = RecordingModel(store)
    rt = await _runtime(store, model, _tools())
    h = await _one_turn(rt)
    second, _ = model.asked[1]
    assert ("tool", "acted") in _contents(second)
    # the step's close (tool messages) is its own commit, before the reply that read them
    assert store.written[-2:] == [[EventType.TOOL_RESULT],
                                  [EventType.MODEL_CALL, EventType.TRANSITION, EventType.RESULT]]
    assert [m["content"] for m in store.messages("l", h.id)][-2:] == ["acted", "acted"]


async def test_a_refused_wake_fails_the_wake_and_the_turn_records_nothing() -> None:
    store = HeldStore()
    model = RecordingModel(store)
    rt = await _runtime(store, model, _tools())
    h = await rt.spawn("root", "a")
    store.refuse = lambda batch: any(e.to_state == "running" for e in batch.events)
    before = len(store.written)
    with pytest.raises(StoreFull):
        await rt.wake(h.id, "go")
    await asyncio.sleep(0.05)  # the turn that started with it sees the refusal too
    assert len(store.written) == before  # nothing after the refused wake was committed
    assert rt.snapshot(h.id).state is HandleState.IDLE
    store.refuse = lambda batch: False
    assert await rt.wake(h.id, "again") is False
    assert (await rt.wait(h.id, 5000)).status is Status.DONE


async def test_a_refused_step_close_ends_the_turn_error_and_its_reply_is_dropped() -> None:
    store = HeldStore()
    model = RecordingModel(store)
    rt = await _runtime(store, model, _tools())
    h = await rt.spawn("root", "a")
    store.refuse = lambda batch: any(m[3].get("role") == "tool" for m in batch.messages)
    assert await rt.wake(h.id, "go") is False
    result = await rt.wait(h.id, 5000)
    assert result.status is Status.ERROR and "store error" in result.text
    assert len(model.asked) == 2  # it was asked beside the refused commit; its reply was not recorded
    assert not any(EventType.MODEL_CALL in kinds and EventType.RESULT in kinds for kinds in store.written)


async def test_the_handle_record_a_wake_commits_counts_the_prompt_it_appends() -> None:
    """The record is serialised when the commit is queued: a transcript length one short would
    make a restarted daemon write its next message over the prompt (found by the chaos run)."""
    store = HeldStore()
    model = RecordingModel(store)
    rt = await _runtime(store, model, _tools())
    h = await rt.spawn("root", "a")
    batches: list[Batch] = []
    store.refuse = lambda batch: bool(batches.append(batch))
    assert await rt.wake(h.id, "go") is False
    wake = next(b for b in batches if any(e.to_state == "running" for e in b.events))
    (index, _), = [(m[2], m[3]) for m in wake.messages if m[1] == h.id]
    assert wake.handles[("l", h.id)]["log_len"] == index + 1
    await rt.wait(h.id, 5000)


class TranscriptReadsStore(HeldStore):
    """Records the ``(start, end)`` of every transcript read of a handle (not the children logs)."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[tuple[int, int | None]] = []

    def messages(self, runtime_id: str, handle_id: str, start: int = 0, end: int | None = None) -> list[JSON]:
        if "#" not in handle_id:
            self.reads.append((start, end))
        return super().messages(runtime_id, handle_id, start, end)


async def test_a_turns_model_calls_read_no_transcript_the_owner_committed() -> None:
    """Every message of the handle's transcript was committed by this owner, so its model calls
    send the held prefix (``state.held``) and read no transcript from the store; the bodies are
    what a full read gives."""
    store = TranscriptReadsStore()
    model = RecordingModel(store)
    rt = await _runtime(store, model, _tools())
    h = await _one_turn(rt)
    assert len(model.asked) == 2
    assert store.reads == []
    stored = store.messages("l", h.id)
    for body, _ in model.asked:
        assert body["messages"] == stored[:len(body["messages"])]


async def test_a_turns_next_model_call_reads_only_what_was_written_since_the_last_one() -> None:
    """With nothing held (``state.held`` with a budget of 0 bytes), a model call reads from the
    store only the part of the transcript this turn has not sent the model yet (what it sent is
    durable by then), never from index 0 again; the body is the same as a full read gives."""
    store = TranscriptReadsStore()
    model = RecordingModel(store)
    rt = await _runtime(store, model, _tools())
    rt.table.held = HeldRecords("l", HeldBudget(0))
    h = await _one_turn(rt)
    assert len(model.asked) == 2
    assert store.reads and all(start > 0 for start, _ in store.reads), store.reads  # no read from 0 again
    second, _ = model.asked[1]
    stored = store.messages("l", h.id)
    assert second["messages"] == stored[:len(second["messages"])]
