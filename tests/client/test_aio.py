"""toolnexus_client.aio against the real daemon: coroutine verbs, async tools and model, async watch.

The model is the reference mock (call the first tool, then answer with its
output) served by an ``async def`` transport of this process; the tool is an
``async def`` too. Everything they run must run on the event loop's thread:
the asyncio client uses no threads of its own.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.daemon import DaemonProcess
from toolnexus_client import (
    Context,
    Event,
    InterruptResult,
    PostResult,
    Request,
    Tool,
    ToolResult,
    Unauthenticated,
    agent,
    registry,
)
from toolnexus_client.aio import Runtime
from toolnexus_devtools import mock_model

AGENT = "operator"
PROMPT = "please perform the secret action"
HOLD = "hold this turn"
TOKEN = "aio-t0ken"
NO_MODEL = {"style": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "none"}


class Served:
    """An async tool and an async model transport that record where (which thread) they ran."""

    def __init__(self) -> None:
        self.threads: set[int] = set()
        self.calls: list[str] = []
        self.model_entered = asyncio.Event()
        self.release = asyncio.Event()

    async def secret_action(self, args: dict[str, Any], ctx: Context) -> ToolResult | str:
        self.threads.add(threading.get_ident())
        self.calls.append(f"tool answer={ctx.answer is not None}")
        await asyncio.sleep(0)
        if ctx.answer is None:
            return ToolResult.suspend(id=f"secret-action:{ctx.handle}", kind="authorization",
                                      prompt="approve?")
        return "action performed"

    async def transport(self, request: dict[str, Any]) -> dict[str, Any]:
        self.threads.add(threading.get_ident())
        self.calls.append("model")
        if HOLD in str(request["body"].get("messages")):
            self.model_entered.set()
            await self.release.wait()  # a turn that stays running until the test lets it go
        return {"status": 200, "headers": {}, "body": mock_model(request["body"])}

    def registry(self) -> Any:
        tool = Tool("secret_action", execute=self.secret_action)
        return registry(agent(AGENT, does="performs actions that need authorization", uses={"tools": [tool]}))


async def test_async_tool_and_model_suspend_and_resume_on_the_loop(daemon: DaemonProcess) -> None:
    """A suspend/resume cycle served by async functions, all on the loop thread."""
    served = Served()
    async with await Runtime.new(daemon.target, served.registry(), transport=served.transport) as rt:
        assert rt.worker is not None and rt.worker.welcomes == 1
        h = await rt.spawn(rt.root, AGENT)
        assert await rt.wake(h, PROMPT) is False
        first = await rt.wait(h, timeout=30)
        assert first.status == "pending" and first.pending is not None
        assert (first.pending.id, first.pending.kind) == (f"secret-action:{h}", "authorization")
        assert (await rt.snapshot(h)).state == "suspended"
        resumed = await rt.resume({"id": first.pending.id, "ok": True})
        assert resumed.handle == h and resumed.result is not None
        assert (resumed.result.status, resumed.result.text) == ("done", "action performed")
        assert [s.id for s in await rt.list()] == [h]
        assert (await rt.info()).version
    assert served.calls == ["model", "tool answer=False", "tool answer=True", "model"]
    assert served.threads == {threading.get_ident()}


async def test_plain_functions_are_served_too(daemon: DaemonProcess) -> None:
    """A sync tool and transport run off the loop (to_thread) and give the same results."""
    def tool(args: dict[str, Any], ctx: Context) -> str:
        return f"sync tool on {ctx.handle}"

    def transport(request: dict[str, Any]) -> dict[str, Any]:
        return {"status": 200, "body": mock_model(request["body"])}

    reg = registry(agent(AGENT, uses={"tools": [Tool("plain", execute=tool)]}))
    async with await Runtime.new(daemon.target, reg, transport=transport) as rt:
        h = await rt.spawn(rt.root, AGENT)
        await rt.wake(h, "go")
        result = await rt.wait(h, timeout=30)
        assert (result.status, result.text) == ("done", f"sync tool on {h}")


async def test_an_async_wait_for_resolver_answers_inline(daemon: DaemonProcess) -> None:
    """``wait_for=`` may be a coroutine function: it answers the request, nothing suspends durably."""
    served = Served()
    asked: list[tuple[str, str]] = []

    async def approve(request: Request) -> dict[str, Any]:
        asked.append((request.kind, request.prompt))
        return {"id": request.id, "ok": True}

    tool = Tool("secret_action", execute=served.secret_action)
    reg = registry(agent(AGENT, uses={"tools": [tool]}, wait_for=True))
    async with await Runtime.new(daemon.target, reg, transport=served.transport, wait_for=approve) as rt:
        h = await rt.spawn(rt.root, AGENT)
        await rt.wake(h, PROMPT)
        result = await rt.wait(h, timeout=30)
    assert (result.status, result.text) == ("done", "action performed")
    assert asked == [("authorization", "approve?")]


async def test_watch_is_an_async_iterator_of_live_events(daemon: DaemonProcess) -> None:
    """``async for`` over watch sees the handle suspend, get resumed and settle idle, live."""
    served = Served()
    async with await Runtime.new(daemon.target, served.registry(), transport=served.transport) as rt:
        h = await rt.spawn(rt.root, AGENT)

        async def transitions() -> list[str]:
            states: list[str] = []
            async for event in rt.watch(types=["transition", "resumed"], handle=h):
                assert isinstance(event, Event) and event.handle == h
                states.append(event.to_state or event.type)
                if event.to_state == "idle" and "suspended" in states:
                    return states
            return states

        watching = asyncio.create_task(transitions())
        await rt.wake(h, PROMPT)
        pending = (await rt.wait(h, timeout=30)).pending
        assert pending is not None
        await rt.resume({"id": pending.id, "ok": True})
        assert await asyncio.wait_for(watching, 30) == ["running", "suspended", "resumed", "idle"]


@pytest.mark.parametrize("how", ["detach", "shutdown"])
async def test_detach_or_shutdown_ends_a_running_watch_quietly(daemon: DaemonProcess, how: str) -> None:
    """The iterating task just finishes: no Cancelled error, no cancelled task."""
    rt = await Runtime.new(daemon.target, registry(agent(AGENT)), llm=NO_MODEL)
    seen: list[Event] = []
    first = asyncio.Event()

    async def consume() -> None:
        async for event in rt.watch():
            seen.append(event)
            first.set()

    watching = asyncio.create_task(consume())
    await rt.spawn(rt.root, AGENT)
    await asyncio.wait_for(first.wait(), 10)
    await (rt.detach() if how == "detach" else rt.shutdown())
    await asyncio.wait_for(watching, 10)  # re-raises whatever the iteration raised
    assert seen[0].type == "spawned"


async def test_post_and_interrupt_say_what_happened(daemon: DaemonProcess) -> None:
    """Post: inbox position and cap. Interrupt: the state left, the request cancelled, items put back."""
    served = Served()
    rt = await Runtime.new(daemon.target, served.registry(), transport=served.transport,
                           options={"inbox_cap": 5})
    try:
        busy, asking = await rt.spawn(rt.root, AGENT), await rt.spawn(rt.root, AGENT)
        assert await rt.post(busy, "one") == PostResult(position=1, inbox_cap=5)
        assert await rt.post(busy, "two", sender="ops") == PostResult(position=2, inbox_cap=5)
        await rt.wake(busy, HOLD)
        await asyncio.wait_for(served.model_entered.wait(), 10)
        assert await rt.interrupt(busy) == InterruptResult(from_state="running", inbox_restored=2)
        assert [item.text for item in (await rt.snapshot(busy)).inbox] == ["one", "two"]
        await rt.wake(asking, PROMPT)
        pending = (await rt.wait(asking, timeout=30)).pending
        assert pending is not None
        assert await rt.interrupt(asking) == InterruptResult(from_state="suspended",
                                                             cancelled_request=pending.id)
    finally:
        served.release.set()
        await rt.shutdown()


@pytest.fixture
def token_daemon(tmp_path: Path) -> Iterator[DaemonProcess]:
    """A daemon that wants ``Bearer TOKEN`` (it reads TOOLNEXUS_TOKEN itself)."""
    proc = DaemonProcess(tmp_path / "data", env={"TOOLNEXUS_TOKEN": TOKEN}).start()
    try:
        yield proc
    finally:
        proc.stop()


async def test_target_and_token_come_from_the_environment(token_daemon: DaemonProcess,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """No target/token passed: TOOLNEXUS_TARGET and TOOLNEXUS_TOKEN are used; passed ones win."""
    reg = registry(agent(AGENT))
    monkeypatch.setenv("TOOLNEXUS_TARGET", token_daemon.target)
    monkeypatch.setenv("TOOLNEXUS_TOKEN", TOKEN)
    async with await Runtime.new(registry=reg, llm=NO_MODEL) as rt:
        assert (await rt.info()).version
    monkeypatch.delenv("TOOLNEXUS_TOKEN")
    with pytest.raises(Unauthenticated):
        await Runtime.new(registry=reg, llm=NO_MODEL)
    monkeypatch.setenv("TOOLNEXUS_TOKEN", "wrong")
    monkeypatch.setenv("TOOLNEXUS_TARGET", "127.0.0.1:1")
    async with await Runtime.new(token_daemon.target, reg, llm=NO_MODEL, token=TOKEN) as rt:
        assert await rt.spawn(rt.root, AGENT) == "root/operator.1"
