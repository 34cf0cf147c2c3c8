"""The pending inbox is an engine read made through ``Store.read``: ListPending, ListRuntimes and
WatchPending (and the engine's inbox itself) read the store only inside ``Store.read``, which on
PostgreSQL runs on a reader thread and never holds the event loop for a round trip.

The store here records every synchronous read made outside ``Store.read``; the servicer is the real
one, called in-process with the engine it serves (the recording store cannot cross a process)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, NoReturn, TypeVar

import grpc
import pytest

from tests.engine.conftest import FunctionTools, ScriptedModel
from tests.engine.test_single_level import SECRET, secret_action
from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_daemon.api.keys import RUNTIME_KEY_HEADER
from toolnexus_daemon.api.servicer import AgentRuntimeServicer
from toolnexus_daemon.clock import ManualClock
from toolnexus_daemon.engine.verbs.engine import Engine
from toolnexus_daemon.engine.verbs.inbox import presented
from toolnexus_daemon.engine.verbs.runtime import Runtime
from toolnexus_daemon.model import (
    JSON,
    Answer,
    Event,
    LlmConfig,
    LlmStyle,
    RuntimeOptions,
    Status,
    ToolSource,
)
from toolnexus_daemon.relay import WorkerHub
from toolnexus_daemon.store import MemoryStore, Store
from toolnexus_daemon.store.base import HandleCensus, HandleKey, PendingQuery, PendingRow
from toolnexus_devtools import mock_model

T = TypeVar("T")
KEY = "tenant-key"


class ReadWatchingStore(MemoryStore):
    """Records the name of every synchronous read made directly, not through ``Store.read`` (on
    PostgreSQL such a read holds the event loop for a round trip, or runs on an unbounded thread)."""

    def __init__(self) -> None:
        super().__init__()
        self.direct: list[str] = []
        self.reads = 0
        self._inside = 0

    async def read(self, work: Callable[[Store], T]) -> T:
        self.reads += 1
        self._inside += 1
        try:
            return await super().read(work)
        finally:
            self._inside -= 1

    def _saw(self, name: str) -> None:
        if not self._inside:
            self.direct.append(name)

    def runtime_ids(self) -> list[str]:
        self._saw("runtime_ids")
        return super().runtime_ids()

    def get_runtime(self, runtime_id: str) -> JSON | None:
        self._saw("get_runtime")
        return super().get_runtime(runtime_id)

    def census(self, runtime_id: str) -> HandleCensus:
        self._saw("census")
        return super().census(runtime_id)

    def pending(self, query: PendingQuery) -> list[PendingRow]:
        self._saw("pending")
        return super().pending(query)

    def get_handle(self, runtime_id: str, handle_id: str) -> JSON | None:
        self._saw("get_handle")
        return super().get_handle(runtime_id, handle_id)

    def get_handles(self, keys: list[HandleKey]) -> list[JSON | None]:
        self._saw("get_handles")
        return super().get_handles(keys)

    def get_request(self, runtime_id: str, request_id: str) -> JSON | None:
        self._saw("get_request")
        return super().get_request(runtime_id, request_id)


@dataclass
class Context:
    """What the servicer reads of a gRPC call's context: its metadata, and abort."""

    key: str = ""

    def invocation_metadata(self) -> list[tuple[str, str]]:
        return [(RUNTIME_KEY_HEADER, self.key)] if self.key else []

    def peer(self) -> str:
        return "ipv4:127.0.0.1:50000"

    def auth_context(self) -> dict[str, list[bytes]]:
        return {}

    async def abort(self, code: grpc.StatusCode, details: str) -> NoReturn:
        raise AssertionError(f"the call was refused: {code} {details}")


@dataclass
class Daemon:
    engine: Engine
    servicer: AgentRuntimeServicer
    store: ReadWatchingStore


@pytest.fixture
async def daemon() -> AsyncIterator[Daemon]:
    store = ReadWatchingStore()
    tools = FunctionTools({"secret_action": secret_action})
    model = ScriptedModel(script=mock_model)
    servicers: list[AgentRuntimeServicer] = []

    def observe(rt: Runtime, events: list[Event]) -> None:  # as the composition root wires WatchPending
        for servicer in servicers:
            servicer.pending.observe(rt.id, events)

    engine = Engine(store, clock=ManualClock(), model_for=lambda llm: model,
                    executors={ToolSource.NATIVE: tools}, observer=observe)
    await engine.start()
    servicer = AgentRuntimeServicer(engine, WorkerHub())
    servicers.append(servicer)
    servicer.open()
    yield Daemon(engine, servicer, store)
    servicer.begin_shutdown()
    await engine.stop()


async def parked(engine: Engine, rid: str, key: str = "") -> tuple[Runtime, str, str]:
    """A runtime (keyed with ``key``) with one handle suspended on an approval: (runtime, handle, request)."""
    await engine.new(rid, [SECRET], LlmConfig(style=LlmStyle.WORKER, model="scripted"), RuntimeOptions(),
                     runtime_key=key)
    rt = engine.runtime(rid)
    h = await rt.spawn("root", "secret")
    await rt.wake(h.id, "do it")
    result = await rt.wait(h.id, 5000)
    assert result.status is Status.PENDING and result.pending is not None
    return rt, h.id, result.pending.id


async def test_list_pending_and_list_runtimes_read_the_store_only_through_store_read(daemon: Daemon) -> None:
    _, open_handle, _ = await parked(daemon.engine, "open")
    _, keyed_handle, _ = await parked(daemon.engine, "keyed", KEY)
    daemon.store.direct.clear()
    before = daemon.store.reads

    anyone = await daemon.servicer.ListPending(pb.ListPendingRequest(), Context())
    holder = await daemon.servicer.ListPending(pb.ListPendingRequest(runtime_id="keyed"), Context(KEY))
    runtimes = await daemon.servicer.ListRuntimes(pb.ListRuntimesRequest(), Context(KEY))

    assert [(i.runtime_id, i.handle) for i in anyone.items] == [("open", open_handle)], \
        "a runtime protected by a key the caller lacks is left out"
    assert [(i.runtime_id, i.handle, i.request.kind) for i in holder.items] == \
        [("keyed", keyed_handle, "authorization")]
    assert [(r.runtime_id, r.keyed, r.pending) for r in runtimes.runtimes] == \
        [("keyed", True, 1), ("open", False, 1)]
    assert daemon.store.direct == [], "the inbox was read around Store.read (off the loop on PostgreSQL)"
    assert daemon.store.reads - before == 3, "each call is one Store.read"


async def test_watch_pending_reads_the_store_only_through_store_read(daemon: Daemon) -> None:
    rt, handle, request_id = await parked(daemon.engine, "watched", KEY)
    daemon.store.direct.clear()
    stream: Any = daemon.servicer.WatchPending(pb.WatchPendingRequest(runtime_id="watched"), Context(KEY))
    try:
        first = [await anext(stream), await anext(stream)]
        assert [(c.type, c.item.handle) for c in first] == [("ADDED", handle), ("SYNCED", "")]
        await rt.resume(Answer(request_id, ok=True), handle_id=handle, no_wait=True)
        removed = await asyncio.wait_for(anext(stream), 5)
        assert (removed.type, removed.item.handle, removed.reason) == ("REMOVED", handle, "answered")
    finally:
        await stream.aclose()
    assert daemon.store.direct == [], "WatchPending read the store around Store.read"


async def test_the_engines_inbox_reads_through_store_read_and_applies_the_keys(daemon: Daemon) -> None:
    _, handle, _ = await parked(daemon.engine, "keyed", KEY)
    inbox = daemon.engine.inbox
    daemon.store.direct.clear()
    mine, nobody = presented(KEY), presented("")

    assert [i.handle for i in (await inbox.pending(PendingQuery(), mine)).items] == [handle]
    assert (await inbox.pending(PendingQuery(), nobody)).items == []
    assert await inbox.sees("keyed", mine) and not await inbox.sees("keyed", nobody)
    assert await inbox.key_of("gone") is None
    assert [r.runtime_id for r in (await inbox.runtimes("", 10, mine)).items] == ["keyed"]
    found = await inbox.open_suspensions(None, {})
    assert [(s.item.handle, bool(s.key)) for s in found.values()] == [(handle, True)]
    assert len(await inbox.why_removed([s.item for s in found.values()])) == 1
    assert daemon.store.direct == []
