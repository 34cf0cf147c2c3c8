"""Sub-agents, escalation, budgets and the lifecycle verbs through the client against a real daemon.

The model is a ``transport`` in this process (style ``worker``): one script
per agent, chosen by the soul in the system message, answering by looking
at the request it gets — so every expected text follows from the semantics.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.support.daemon import DaemonProcess
from toolnexus_client import Budget, Context, Request, Runtime, Tool, ToolResult, agent, registry
from toolnexus_devtools import chat_response, tool_call

Body = dict[str, Any]


def _tools(body: Body) -> list[str]:
    return [str(m.get("content") or "") for m in body["messages"] if m.get("role") == "tool"]


def _reply(response: Body) -> Body:
    return {"status": 200, "headers": {}, "body": response}


def transport_for(scripts: dict[str, Callable[[Body], Body]]) -> Callable[[Body], Body]:
    """Route each model call to the script of the agent whose soul opens the request."""
    def transport(request: Body) -> Body:
        body = request["body"]
        return _reply(scripts[body["messages"][0]["content"]](body))
    return transport


def check_secret(args: Body, ctx: Context) -> ToolResult | str:
    if ctx.answer is None:
        return ToolResult.suspend(id=f"secret:{ctx.handle}", kind="approval", prompt="approve secret access?")
    return "secret-token"


def asker_script(body: Body) -> Body:
    tools = _tools(body)
    if tools:
        return chat_response(content="asker-done: " + tools[0], usage=(2, 1, 3))
    return chat_response(tool_calls=[tool_call("check_secret", {})], usage=(2, 1, 3))


def parent_script(body: Body) -> Body:
    tools = _tools(body)
    if tools:
        return chat_response(content="parent-final: " + tools[0], usage=(1, 1, 2))
    return chat_response(tool_calls=[tool_call("task", {"agent": "asker", "prompt": "get the secret"})],
                         usage=(1, 1, 2))


SCRIPTS = {"parent": parent_script, "asker": asker_script}


def escalation_registry(wait_for: bool) -> list[Any]:
    return registry(agent("parent", soul="parent", does="plans", team=["asker"], wait_for=wait_for),
                    agent("asker", soul="asker", does="asks for approval",
                          uses={"tools": [Tool("check_secret", execute=check_secret)]}))


@pytest.fixture
def runtimes(daemon: DaemonProcess) -> Iterator[list[Runtime]]:
    made: list[Runtime] = []
    yield made
    for rt in made:
        rt.detach()


def _take(rt: Runtime, n: int, types: list[str], handle: str | None = None) -> list[Any]:
    """The first ``n`` stored events of these types (the stream is cancelled after 10 s regardless)."""
    out: list[Any] = []
    with rt.watch(types=types, handle=handle) as stream:
        guard = threading.Timer(10, stream.cancel)
        guard.start()
        try:
            for ev in stream:
                out.append(ev)
                if len(out) == n:
                    break
        finally:
            guard.cancel()
    return out


def test_fan_out_runs_two_children_concurrently(daemon: DaemonProcess, runtimes: list[Runtime]) -> None:
    lock = threading.Lock()
    active, overlap = [0], [False]

    def explore(body: Body) -> Body:
        tools = _tools(body)
        if tools:
            return chat_response(content="found:" + tools[0], usage=(1, 1, 2))
        with lock:
            active[0] += 1
            overlap[0] = overlap[0] or active[0] > 1
        time.sleep(0.3)
        with lock:
            active[0] -= 1
        return chat_response(tool_calls=[tool_call("lookup", {"q": "x"})], usage=(1, 1, 2))

    def coordinator(body: Body) -> Body:
        tools = _tools(body)
        if tools:
            return chat_response(content="synthesis: " + " + ".join(tools), usage=(3, 2, 5))
        return chat_response(tool_calls=[tool_call("task", {"agent": "explore", "prompt": "find A"}, "t1"),
                                         tool_call("task", {"agent": "explore", "prompt": "find B"}, "t2")],
                             usage=(3, 2, 5))

    reg = registry(agent("coordinator", soul="coordinator", team=["explore"]),
                   agent("explore", soul="explore", does="looks things up",
                         uses={"tools": [Tool("lookup", execute=lambda a, c: f"data({a['q']})")]}))
    rt = Runtime.new(target=daemon.target, registry=reg,
                     transport=transport_for({"coordinator": coordinator, "explore": explore}))
    runtimes.append(rt)
    top = rt.spawn(rt.root, "coordinator")
    rt.wake(top, "go")
    result = rt.wait(top, timeout=30)
    assert (result.status, result.text) == ("done", "synthesis: found:data(x) + found:data(x)")
    snap = rt.snapshot(top)
    assert list(snap.children) == [f"{top}/explore.1", f"{top}/explore.2"]
    assert [rt.snapshot(c).state for c in snap.children] == ["closed", "closed"]
    assert snap.usage_total == 10 + 2 * 4, "own tokens plus both children's"
    assert overlap[0], "the two children's model calls overlapped in time"


def test_escalation_is_answered_inline_by_the_nearest_interpreter(daemon: DaemonProcess,
                                                                 runtimes: list[Runtime]) -> None:
    asked: list[Request] = []

    def approve(request: Request) -> dict[str, Any]:
        asked.append(request)
        return {"id": request.id, "ok": True}

    rt = Runtime.new(target=daemon.target, registry=escalation_registry(True),
                     transport=transport_for(SCRIPTS), wait_for=approve)
    runtimes.append(rt)
    top = rt.spawn(rt.root, "parent")
    rt.wake(top, "go")
    result = rt.wait(top, timeout=30)
    assert (result.status, result.text) == ("done", "parent-final: asker-done: secret-token")
    assert [r.prompt for r in asked] == ["approve secret access?"]
    leaf = f"{top}/asker.1"
    events = _take(rt, 5, ["transition", "pending"], handle=leaf)
    assert [e.type for e in events] == ["transition"] * 5, "no durable suspension"
    assert [(e.from_state, e.to_state) for e in events] == [
        ("idle", "running"), ("running", "suspended"), ("suspended", "running"),
        ("running", "idle"), ("idle", "closed")]


@pytest.mark.parametrize("crash", [False, True], ids=["restart-free", "kill-9-between-phases"])
def test_durable_nested_resume(daemon: DaemonProcess, runtimes: list[Runtime], crash: bool) -> None:
    rt = Runtime.new(target=daemon.target, registry=escalation_registry(False),
                     transport=transport_for(SCRIPTS))
    runtimes.append(rt)
    top = rt.spawn(rt.root, "parent")
    rt.wake(top, "go")
    pending = rt.wait(top, timeout=30)
    leaf = f"{top}/asker.1"
    assert pending.status == "pending" and pending.pending is not None
    assert pending.pending.kind == "approval" and pending.pending.data == {"path": leaf.split("/")}
    assert {rt.snapshot(top).state, rt.snapshot(leaf).state} == {"suspended"}
    usage_before = rt.snapshot(leaf).usage_total
    if crash:
        rt.detach()
        daemon.kill9()
        daemon.start()
        rt = Runtime.new(target=daemon.target, registry=escalation_registry(False),
                         transport=transport_for(SCRIPTS), runtime_id=rt.id)
        runtimes.append(rt)
    out = rt.resume({"id": pending.pending.id, "ok": True})
    assert out.handle == top and out.result is not None
    assert (out.result.status, out.result.text) == ("done", "parent-final: asker-done: secret-token")
    assert list(rt.snapshot(top).children) == [leaf], "exactly one asker was ever spawned"
    assert rt.snapshot(leaf).usage_total > usage_before
    moves = [(e.from_state, e.to_state) for e in _take(rt, 5, ["transition"], handle=top)]
    assert moves == [("idle", "running"), ("running", "suspended"), ("suspended", "idle"),
                     ("idle", "running"), ("running", "idle")]


def test_budgets_and_max_turns(daemon: DaemonProcess, runtimes: list[Runtime]) -> None:
    def spender(body: Body) -> Body:
        return chat_response(content="spent", usage=(60, 60, 120))

    def looper(body: Body) -> Body:
        return chat_response(tool_calls=[tool_call("spin", {})], usage=(1, 1, 2))

    pool_budget = Budget(max_tokens=100, max_children=2)
    reg = registry(agent("pool", soul="pool", team=["spender"], budget=pool_budget),
                   agent("spender", soul="spender"),
                   agent("looper", soul="looper", budget=Budget(max_turns=3),
                         uses={"tools": [Tool("spin", execute=lambda a, c: "again")]}))
    rt = Runtime.new(target=daemon.target, registry=reg,
                     transport=transport_for({"spender": spender, "looper": looper}))
    runtimes.append(rt)
    pool = rt.spawn(rt.root, "pool")
    greedy = rt.spawn(pool, "spender", budget=Budget(max_tokens=500))
    assert rt.snapshot(greedy).usage_total == 0
    second = rt.spawn(pool, "spender")
    with pytest.raises(Exception, match="maxChildren 2 exceeded"):
        rt.spawn(pool, "spender")
    rt.wake(greedy, "spend")
    assert rt.wait(greedy, timeout=30).status == "done"
    rt.wake(second, "spend more")
    spent = rt.wait(second, timeout=30)
    assert (spent.status, spent.limit) == ("incomplete", "maxTokens")
    assert spent.text == "budget exhausted (tokens); partial work preserved"
    loop = rt.spawn(rt.root, "looper")
    rt.wake(loop, "spin")
    capped = rt.wait(loop, timeout=30)
    assert (capped.status, capped.text) == ("incomplete", "hit maxTurns without a final answer")
    assert capped.turns == 3


def test_inbox_interrupt_and_close(daemon: DaemonProcess, runtimes: list[Runtime]) -> None:
    release = threading.Event()

    def counter(body: Body) -> Body:
        user = body["messages"][-1]["content"]
        lines = [ln for ln in user.splitlines() if ln[:1].isdigit() and ". [from=" in ln]
        return chat_response(content=f"processed {len(lines)} items")

    def slow(body: Body) -> Body:
        release.wait(10)
        return chat_response(content="slow done")

    reg = registry(agent("counter", soul="counter"), agent("slow", soul="slow"),
                   agent("boss", soul="boss", team=["counter"]))
    rt = Runtime.new(target=daemon.target, registry=reg, options={"inbox_cap": 6},
                     transport=transport_for({"counter": counter, "slow": slow}))
    runtimes.append(rt)
    h = rt.spawn(rt.root, "counter")
    for text in ("a", "b", "c"):
        rt.post(h, text)
    for _ in range(3):
        rt.post(h, "tick", sender="clock", channel="timer")
    rt.wake(h, "count")
    assert rt.wait(h, timeout=30).text == "processed 4 items"  # a, b, c and the one coalesced tick line
    s = rt.spawn(rt.root, "slow")
    rt.post(s, "keep me")
    rt.wake(s, "work")
    rt.interrupt(s)
    assert rt.wait(s, timeout=30).status == "interrupted"
    snap = rt.snapshot(s)
    assert snap.state == "idle" and [i.text for i in snap.inbox] == ["keep me"]
    release.set()
    boss = rt.spawn(rt.root, "boss")
    child = rt.spawn(boss, "counter")
    grandchild = rt.spawn(child, "counter")
    rt.close(boss)
    closed = [e.handle for e in _take(rt, 3, ["closed"])]
    assert closed == [grandchild, child, boss]
    with pytest.raises(Exception, match=f"inbox closed: {child}"):
        rt.post(child, "late")


def test_max_concurrent_one_queues_the_second_child(daemon: DaemonProcess, runtimes: list[Runtime]) -> None:
    lock = threading.Lock()
    running, most = [0], [0]

    def explore(body: Body) -> Body:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.2)
        with lock:
            running[0] -= 1
        return chat_response(content="explored " + body["messages"][-1]["content"])

    def coordinator(body: Body) -> Body:
        tools = _tools(body)
        if tools:
            return chat_response(content=" | ".join(tools))
        return chat_response(tool_calls=[tool_call("task", {"agent": "explore", "prompt": "A"}, "t1"),
                                         tool_call("task", {"agent": "explore", "prompt": "B"}, "t2")])

    one_at_a_time = Budget(max_concurrent=1)
    reg = registry(agent("coordinator", soul="coordinator", team=["explore"], budget=one_at_a_time),
                   agent("explore", soul="explore", does="explores"))
    rt = Runtime.new(target=daemon.target, registry=reg, options={"max_concurrent_turns": 1},
                     transport=transport_for({"coordinator": coordinator, "explore": explore}))
    runtimes.append(rt)
    top = rt.spawn(rt.root, "coordinator")
    rt.wake(top, "go")
    result = rt.wait(top, timeout=30)
    assert (result.status, result.text) == ("done", "explored A | explored B")
    assert most[0] == 1, "never two children running"
    notes = [e.note for e in _take(rt, 2, ["post"])]
    assert notes == [f"{top}/explore.2: wake QUEUED (parent concurrency 1)",
                     f"{top}/explore.2: DEQUEUED wake (slot freed)"]


def test_a_kill_9_in_the_middle_of_the_cascade(daemon: DaemonProcess, runtimes: list[Runtime]) -> None:
    """The asker's post-answer model call is slow; the daemon dies during it and the cascade still ends."""
    entered = threading.Event()

    def slow_asker(body: Body) -> Body:
        if _tools(body):
            entered.set()
            time.sleep(1.0)
        return asker_script(body)

    scripts = {"parent": parent_script, "asker": slow_asker}
    rt = Runtime.new(target=daemon.target, registry=escalation_registry(False),
                     transport=transport_for(scripts))
    runtimes.append(rt)
    top = rt.spawn(rt.root, "parent")
    rt.wake(top, "go")
    pending = rt.wait(top, timeout=30).pending
    assert pending is not None
    accepted = rt.resume({"id": pending.id, "ok": True}, no_wait=True)
    assert accepted.handle == top and accepted.result is None
    assert entered.wait(10), "the cascade reached the asker's model call"
    daemon.kill9()
    daemon.start()
    again = Runtime.new(target=daemon.target, registry=escalation_registry(False),
                        transport=transport_for(scripts), runtime_id=rt.id)
    runtimes.append(again)
    final = again.wait(top, timeout=30)
    assert (final.status, final.text) == ("done", "parent-final: asker-done: secret-token")
    assert list(again.snapshot(top).children) == [f"{top}/asker.1"]
    duplicate = again.resume({"id": pending.id, "ok": True})
    assert duplicate.duplicate and duplicate.handle == top
    assert duplicate.result is not None and duplicate.result.text == final.text


def test_inbox_cap_and_closing_the_root(daemon: DaemonProcess, runtimes: list[Runtime]) -> None:
    reg = registry(agent("boss", soul="boss", team=["counter"]), agent("counter", soul="counter"))
    rt = Runtime.new(target=daemon.target, registry=reg, options={"inbox_cap": 2},
                     transport=transport_for({}))
    runtimes.append(rt)
    boss = rt.spawn(rt.root, "boss")
    child = rt.spawn(boss, "counter")
    grandchild = rt.spawn(child, "counter")
    rt.post(child, "one")
    rt.post(child, "two")
    with pytest.raises(Exception, match=f"inbox full: {child}"):
        rt.post(child, "three")
    rt.close(rt.root)
    closed = [e.handle for e in _take(rt, 4, ["closed"])]
    assert closed == [grandchild, child, boss, "root"], "leaf first, the root last"
    with pytest.raises(Exception, match=f"inbox closed: {boss}"):
        rt.post(boss, "late")


def test_two_suspensions_in_one_message(daemon: DaemonProcess, runtimes: list[Runtime]) -> None:
    runs: list[str] = []

    def ask(args: Body, ctx: Context) -> ToolResult | str:
        runs.append(f"ask{args['n']}:{'answered' if ctx.answer else 'fresh'}")
        if ctx.answer is None:
            return ToolResult.suspend(id=f"q{args['n']}", kind="input", prompt=f"value {args['n']}?")
        return f"got {args['n']}={ctx.answer.data['value']}"

    def plain(args: Body, ctx: Context) -> str:
        runs.append("plain")
        return "plain"

    def two(body: Body) -> Body:
        tools = _tools(body)
        if tools:
            return chat_response(content=" & ".join(tools))
        return chat_response(tool_calls=[tool_call("ask", {"n": 1}, "c1"), tool_call("ask", {"n": 2}, "c2"),
                                         tool_call("plain", {}, "c3")])

    reg = registry(agent("two", soul="two", uses={"tools": [Tool("ask", execute=ask),
                                                            Tool("plain", execute=plain)]}))
    rt = Runtime.new(target=daemon.target, registry=reg, transport=transport_for({"two": two}))
    runtimes.append(rt)
    h = rt.spawn(rt.root, "two")
    rt.wake(h, "go")
    first = rt.wait(h, timeout=30)
    assert first.pending is not None and first.pending.id == "q1", "the first in call order surfaces"
    second = rt.resume({"id": "q1", "ok": True, "data": {"value": "A"}})
    assert second.result is not None and second.result.pending is not None
    assert second.result.pending.id == "q2"
    final = rt.resume({"id": "q2", "ok": True, "data": {"value": "B"}})
    assert final.result is not None and final.result.text == "got 1=A & got 2=B & plain"
    assert runs.count("plain") == 1, "the completed call is not run again"
