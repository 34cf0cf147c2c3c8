"""The blocking client against the real daemon: quiet end of watches, Post/Interrupt results, env defaults."""

from __future__ import annotations

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
    Runtime,
    Tool,
    ToolResult,
    Unauthenticated,
    agent,
    registry,
)
from toolnexus_devtools import mock_model

AGENT = "operator"
PROMPT = "please perform the secret action"
HOLD = "hold this turn"
TOKEN = "blocking-t0ken"
NO_MODEL = {"style": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "none"}


def secret_action(args: dict[str, Any], ctx: Context) -> ToolResult | str:
    if ctx.answer is None:
        return ToolResult.suspend(id=f"secret-action:{ctx.handle}", kind="authorization", prompt="approve?")
    return "action performed"


REGISTRY = registry(agent(AGENT, uses={"tools": [Tool("secret_action", execute=secret_action)]}))


@pytest.mark.parametrize("how", ["detach", "shutdown"])
def test_detach_or_shutdown_ends_a_watch_thread_quietly(daemon: DaemonProcess, how: str) -> None:
    """The thread iterating ``rt.watch()`` just finishes: no ``Cancelled: ... Stream removed``."""
    rt = Runtime.new(daemon.target, registry(agent(AGENT)), llm=NO_MODEL)
    seen: list[Event] = []
    errors: list[BaseException] = []
    first = threading.Event()

    def consume() -> None:
        try:
            for event in rt.watch():
                seen.append(event)
                first.set()
        except BaseException as exc:  # what the thread would die of, with a traceback
            errors.append(exc)

    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    rt.spawn(rt.root, AGENT)
    assert first.wait(10)
    rt.detach() if how == "detach" else rt.shutdown()
    thread.join(10)
    assert not thread.is_alive() and errors == []
    assert seen[0].type == "spawned"


def test_post_and_interrupt_say_what_happened(daemon: DaemonProcess) -> None:
    """Post: inbox position and cap. Interrupt: the state left, the request cancelled, items put back."""
    entered, release = threading.Event(), threading.Event()

    def transport(request: dict[str, Any]) -> dict[str, Any]:
        if HOLD in str(request["body"].get("messages")):
            entered.set()
            release.wait(30)  # a turn that stays running until the test lets it go
        return {"status": 200, "body": mock_model(request["body"])}

    rt = Runtime.new(daemon.target, REGISTRY, transport=transport, options={"inbox_cap": 4})
    try:
        busy, asking = rt.spawn(rt.root, AGENT), rt.spawn(rt.root, AGENT)
        assert rt.post(busy, "one") == PostResult(position=1, inbox_cap=4)
        assert rt.post(busy, "two", sender="ops") == PostResult(position=2, inbox_cap=4)
        rt.wake(busy, HOLD)
        assert entered.wait(10)
        assert rt.interrupt(busy) == InterruptResult(from_state="running", inbox_restored=2)
        rt.wake(asking, PROMPT)
        pending = rt.wait(asking, timeout=30).pending
        assert pending is not None
        assert rt.interrupt(asking) == InterruptResult(from_state="suspended", cancelled_request=pending.id)
    finally:
        release.set()
        rt.shutdown()


@pytest.fixture
def token_daemon(tmp_path: Path) -> Iterator[DaemonProcess]:
    """A daemon that wants ``Bearer TOKEN`` (it reads TOOLNEXUS_TOKEN itself)."""
    proc = DaemonProcess(tmp_path / "data", env={"TOOLNEXUS_TOKEN": TOKEN}).start()
    try:
        yield proc
    finally:
        proc.stop()


def test_target_and_token_come_from_the_environment(token_daemon: DaemonProcess,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """No target/token passed: TOOLNEXUS_TARGET and TOOLNEXUS_TOKEN are used; passed ones win."""
    reg = registry(agent(AGENT))
    monkeypatch.setenv("TOOLNEXUS_TARGET", token_daemon.target)
    monkeypatch.setenv("TOOLNEXUS_TOKEN", TOKEN)
    with Runtime.new(registry=reg, llm=NO_MODEL) as rt:
        assert rt.info().version
    monkeypatch.delenv("TOOLNEXUS_TOKEN")
    with pytest.raises(Unauthenticated):
        Runtime.new(registry=reg, llm=NO_MODEL)
    monkeypatch.setenv("TOOLNEXUS_TOKEN", "wrong")
    monkeypatch.setenv("TOOLNEXUS_TARGET", "127.0.0.1:1")
    with Runtime.new(token_daemon.target, reg, llm=NO_MODEL, token=TOKEN) as rt:
        assert rt.spawn(rt.root, AGENT) == "root/operator.1"


def test_info_carries_the_daemons_addresses_and_configuration(tmp_path: Path) -> None:
    """``Info`` through both faces: where the daemon listens, its metrics endpoint and its effective
    configuration by flag name, a secret redacted (the Node client's ``info()`` carries the same)."""
    import asyncio

    from toolnexus_client.aio import Runtime as AioRuntime

    proc = DaemonProcess(tmp_path / "data", "--metrics-listen", "127.0.0.1:0",
                         env={"TOOLNEXUS_TOKEN": TOKEN}).start()
    try:
        reg = registry(agent(AGENT))
        with Runtime.new(target=proc.target, token=TOKEN, registry=reg, llm=NO_MODEL) as rt:
            info = rt.info()

        async def aio_info() -> Any:
            async with await AioRuntime.new(proc.target, reg, token=TOKEN, llm=NO_MODEL) as art:
                return await art.info()

        for got in (info, asyncio.run(aio_info())):
            assert proc.target in got.listen, got.listen
            assert got.config["auth-token"] == "<redacted>"
            assert got.config["data-dir"] == str(tmp_path / "data")
            host, _, port = got.metrics_address.rpartition(":")
            assert host == "127.0.0.1" and int(port) > 0
    finally:
        proc.stop()


def test_action_id_is_stable_across_a_resume_and_new_for_the_next_action(daemon: DaemonProcess) -> None:
    """``ctx.action_id``: the same when the resume re-invokes the call, different for the next call, so
    request ids built from it are unique per action (a request id is single-use within a runtime)."""
    seen: list[tuple[str, str, bool]] = []

    def approve_once(args: dict[str, Any], ctx: Context) -> ToolResult | str:
        seen.append((ctx.call_id, ctx.action_id, ctx.answer is not None))
        if ctx.answer is None:
            return ToolResult.suspend(id=f"secret:{ctx.action_id}", kind="authorization", prompt="approve?")
        return "action performed"

    reg = registry(agent(AGENT, uses={"tools": [Tool("secret_action", execute=approve_once)]}))
    rt = Runtime.new(daemon.target, reg, transport=lambda r: {"status": 200, "body": mock_model(r["body"])})
    try:
        ids = []
        for _ in range(2):  # two handles: two actions of the same tool
            h = rt.spawn(rt.root, AGENT)
            rt.wake(h, PROMPT)
            pending = rt.wait(h, timeout=30).pending
            assert pending is not None
            ids.append(pending.id)
            assert rt.resume({"id": pending.id, "ok": True}).result.text == "action performed"
    finally:
        rt.shutdown()
    (c1, a1, _), (c1b, a1b, answered), (c2, a2, _), _ = seen
    assert a1 == a1b and answered and a1 and a2 and a1 != a2, seen
    assert ids == [f"secret:{a1}", f"secret:{a2}"] and c2 != c1


def test_a_plain_tool_calls_back_into_its_runtime(daemon: DaemonProcess) -> None:
    """A blocking client's plain tool runs in the client's thread pool, not on its loop: it may use
    the runtime's blocking verbs (here: spawn a helper, wait for its fused turn, read a snapshot)."""
    seen: dict[str, Any] = {}
    holder: list[Runtime] = []

    def delegate(args: dict[str, Any], ctx: Context) -> str:
        rt = holder[0]
        helper = rt.spawn(rt.root, "helper", prompt="say ok", wait=30)
        seen["helper"] = helper.result.text if helper.result else None
        seen["state"] = rt.snapshot(ctx.handle).state
        seen["thread"] = threading.current_thread().name
        return "delegated"

    reg = registry(agent(AGENT, uses={"tools": [Tool("delegate", execute=delegate)]}), agent("helper"))

    def transport(request: dict[str, Any]) -> dict[str, Any]:
        return {"status": 200, "body": mock_model(request["body"])}

    with Runtime.new(daemon.target, reg, transport=transport) as rt:
        holder.append(rt)
        woken = rt.spawn(rt.root, AGENT, prompt="delegate it", wait=30)
        assert woken.result is not None and (woken.result.status, woken.result.text) == ("done", "delegated")
    assert seen == {"helper": "ok", "state": "running", "thread": seen["thread"]}
    assert seen["thread"].startswith("toolnexus-call")


def test_an_async_tool_of_a_blocking_client_may_not_block_its_loop(daemon: DaemonProcess) -> None:
    """An ``async def`` tool runs on the client's loop: a blocking verb there would wait for that
    very loop forever, so it is refused with a RuntimeError saying what to use instead."""
    holder: list[Runtime] = []

    async def blocks(args: dict[str, Any], ctx: Context) -> str:
        holder[0].snapshot(ctx.handle)
        return "unreachable"

    reg = registry(agent(AGENT, uses={"tools": [Tool("blocks", execute=blocks)]}))

    def transport(request: dict[str, Any]) -> dict[str, Any]:
        return {"status": 200, "body": mock_model(request["body"])}

    with Runtime.new(daemon.target, reg, transport=transport) as rt:
        holder.append(rt)
        woken = rt.spawn(rt.root, AGENT, prompt="go", wait=30)
        assert woken.result is not None and woken.result.status == "done"
        assert woken.result.text is not None and "RuntimeError" in woken.result.text
        assert "use toolnexus_client.aio there" in woken.result.text


def test_detach_ends_the_clients_threads(daemon: DaemonProcess) -> None:
    """A detached client leaves no thread of its own behind, and its verbs say it is closed."""
    before = {t.ident for t in threading.enumerate()}
    rt = Runtime.new(daemon.target, REGISTRY, llm=NO_MODEL)
    rt.list()
    rt.detach()
    rt.detach()  # idempotent
    left = [t.name for t in threading.enumerate() if t.ident not in before and t.name.startswith("toolnexus")]
    assert left == []
    with pytest.raises(ValueError, match="this client is closed"):
        rt.list()
