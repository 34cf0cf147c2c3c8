"""Answer links in the engine (docs/protocol.md §10): minted only when asked, stored only as a
digest, found by one keyed read, and an unknown token costs the same reads as a known one."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from toolnexus_daemon.answers.links import Links, LinkState
from toolnexus_daemon.engine.state.answer_links import LINKS_RUNTIME, digest
from toolnexus_daemon.engine.state.request_entry import RequestEntry
from toolnexus_daemon.errors import FailedPrecondition
from toolnexus_daemon.model import JSON, AgentDef, Answer, Request, Status, ToolDef, ToolResult
from toolnexus_daemon.store import MemoryStore
from toolnexus_daemon.tools.base import ToolInvocation
from toolnexus_devtools.model_server import chat_response, tool_call

from .conftest import Bench, new_runtime
from .test_nested import COORD, two_level_model
from .test_single_level import secret_action

BASE = "https://approve.example"


def asker(request_id: str = "ok-to-ship") -> Callable[[JSON, ToolInvocation], ToolResult]:
    def act(args: JSON, inv: ToolInvocation) -> ToolResult:
        if inv.answer is None:
            return ToolResult(output="", pending=Request(id=request_id, kind="approval", prompt="ship it?"))
        return ToolResult(output="shipped")
    return act


def calls_act_once(body: JSON) -> JSON:
    if any(m.get("role") == "tool" for m in body.get("messages") or []):
        return chat_response(content="finished")
    return chat_response(tool_calls=[tool_call("act", {})])


async def _parked(bench: Bench, tool: ToolDef, rid: str = "r1") -> tuple[str, Request]:
    bench.engine.answer_base = BASE
    bench.model.script = calls_act_once
    bench.tools.functions["act"] = asker()
    rt = await new_runtime(bench, rid, AgentDef(name="shipper", tools=(tool,)))
    h = (await rt.spawn("root", "shipper")).id
    await rt.wake(h, "go")
    result = await rt.wait(h, 5000)
    assert result.status is Status.PENDING and result.pending is not None
    return h, result.pending


class CountingStore:
    """Counts request reads of the store under it (the work a lookup does)."""

    def __init__(self, store: MemoryStore) -> None:
        self.store, self.reads = store, 0

    def get_request(self, runtime_id: str, request_id: str) -> JSON | None:
        self.reads += 1
        return self.store.get_request(runtime_id, request_id)


async def test_a_link_is_stored_as_a_digest_with_a_row_keyed_by_it(bench: Bench) -> None:
    h, pending = await _parked(bench, ToolDef(name="act", answer_link=True))
    assert pending.answer_url is not None and pending.answer_url.startswith(BASE + "/a/")
    token = pending.answer_url.rsplit("/", 1)[1]
    entry = RequestEntry.from_json(bench.store.get_request("r1", pending.id) or {})
    assert entry.links == [digest(token)] and "answer_url" not in entry.request
    assert bench.store.get_request(LINKS_RUNTIME, digest(token)) == {
        "runtime": "r1", "request": pending.id, "handle": h}
    stored = bench.store.get_handle("r1", h) or {}
    assert token not in str(stored) and token not in str(bench.store.events("r1"))


async def test_no_link_unless_asked_and_none_without_a_listener(bench: Bench) -> None:
    _, pending = await _parked(bench, ToolDef(name="act"))
    assert pending.answer_url is None
    bench.engine.answer_base = ""
    with pytest.raises(FailedPrecondition, match="--answers-listen"):
        await new_runtime(bench, "r2", AgentDef(name="a", tools=(ToolDef(name="act", answer_link=True),)))


async def test_an_unknown_token_costs_the_same_reads_as_a_known_one(bench: Bench) -> None:
    _, pending = await _parked(bench, ToolDef(name="act", answer_link=True))
    assert pending.answer_url is not None
    counting = CountingStore(bench.store)
    bench.engine.store = counting  # type: ignore[assignment]
    links = Links(bench.engine, bench.clock)
    known = links.find(pending.answer_url.rsplit("/", 1)[1])
    assert known is not None and known.state is LinkState.PENDING
    known_reads, counting.reads = counting.reads, 0
    assert links.find("A" * 43) is None
    assert counting.reads == known_reads == 2
    counting.reads = 0
    assert links.find("x" * 10_000) is None and counting.reads == 2


async def test_answering_through_the_link_resumes_the_handle(bench: Bench) -> None:
    h, pending = await _parked(bench, ToolDef(name="act", answer_link=True))
    assert pending.answer_url is not None
    links = Links(bench.engine, bench.clock)
    link = links.find(pending.answer_url.rsplit("/", 1)[1])
    assert link is not None
    out = await links.answer(link, Answer(pending.id, ok=True))
    assert (out.status, out.state, out.handle) == (200, "answered", h)
    done = await bench.engine.runtime("r1").wait(h, 5000)
    assert (done.status, done.text) == (Status.DONE, "finished")
    again = links.find(pending.answer_url.rsplit("/", 1)[1])
    assert again is not None and again.state is LinkState.ANSWERED
    assert (await links.answer(again, Answer(pending.id, ok=True))).state == "duplicate"
    assert (await links.answer(again, Answer(pending.id, ok=False))).status == 409


async def test_the_parent_of_a_linked_suspension_announces_the_same_link(bench: Bench) -> None:
    """A coordinator whose sub-agent asked for a link is suspended on the same request, link and all:
    the app waiting on the top-level handle gets the URL."""
    bench.engine.answer_base = BASE
    bench.model.script = two_level_model
    bench.tools.functions["secret_action"] = secret_action
    asker = AgentDef(name="asker", does="asks for approval", soul="asker",
                     tools=(ToolDef(name="secret_action"),), answer_link=True)
    rt = await new_runtime(bench, "n1", COORD, asker)
    top = (await rt.spawn("root", "coordinator")).id
    await rt.wake(top, "start")
    result = await rt.wait(top, 5000)
    assert result.pending is not None and result.pending.answer_url is not None
    assert rt.snapshot(f"{top}/asker.1").pending.answer_url == result.pending.answer_url
    links = Links(bench.engine, bench.clock)
    link = links.find(result.pending.answer_url.rsplit("/", 1)[1])
    assert link is not None and link.row.handle == f"{top}/asker.1"
    assert (await links.answer(link, Answer(result.pending.id, ok=True))).handle == top
    done = await rt.wait(top, 5000)
    assert done.status is Status.DONE
