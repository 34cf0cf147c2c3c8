"""Request ids, reattach and Resume through a real daemon and the Python client."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.daemon import DaemonProcess
from toolnexus_client import Context, Runtime, Tool, ToolResult, agent, registry
from toolnexus_client.errors import FailedPrecondition
from toolnexus_daemon.model import JSON
from toolnexus_devtools import Reply, ScriptedModelServer, chat_response, tool_call


@pytest.fixture
def daemon(tmp_path: Any) -> Iterator[DaemonProcess]:
    with DaemonProcess(tmp_path / "data") as proc:
        yield proc


def twice_then_answer(body: JSON) -> JSON:
    """Asks for ``secret_action`` in two steps, then answers with both results."""
    done = [str(m["content"]) for m in body["messages"] if m.get("role") == "tool"]
    if len(done) >= 2:
        return chat_response(content=" | ".join(done), usage=(1, 1, 2))
    return chat_response(content="", tool_calls=[tool_call("secret_action", {}, id=f"c{len(done)}")],
                         usage=(1, 1, 2))


def handle_scoped_approval(performed: list[str]) -> Tool:
    """The README's old pattern: one request id per handle, reused by every action."""
    def secret_action(args: dict[str, Any], ctx: Context) -> ToolResult | str:
        if ctx.answer is None:
            return ToolResult.suspend(kind="authorization", prompt="approve?", id=f"secret:{ctx.handle}")
        performed.append(ctx.answer.id)
        return "action performed"
    schema = {"type": "object", "properties": {}}
    return Tool("secret_action", "needs approval", schema, execute=secret_action)


def test_retrying_the_first_resume_never_approves_the_second_action(daemon: DaemonProcess) -> None:
    performed: list[str] = []
    with ScriptedModelServer(twice_then_answer) as model:
        reg = registry(agent("operator", does="acts", uses={"tools": [handle_scoped_approval(performed)]}))
        rt = Runtime.new(target=daemon.target, registry=reg,
                         llm={"style": "openai", "base_url": model.url, "model": "m"})
        try:
            h = rt.spawn(rt.root, "operator")
            rt.wake(h, "act twice")
            first = rt.wait(h, timeout=20).pending
            assert first is not None and first.id == f"secret:{h}"
            rt.resume({"id": first.id, "ok": True})
            second = rt.wait(h, timeout=20).pending
            assert second is not None and second.id.startswith(f"secret:{h}~"), second
            replay = rt.resume({"id": first.id, "ok": True})  # a client retrying after UNAVAILABLE
            assert replay.duplicate
            assert rt.snapshot(h).state == "suspended" and performed == [first.id]
            events = rt.watch(types=["pending"])
            announced = [next(iter(events)).pending, next(iter(events)).pending]
            events.cancel()
            assert [p.id for p in announced if p is not None] == [first.id, second.id]
            rt.resume({"id": second.id, "ok": True})
            assert rt.snapshot(h).last_result.text == "action performed | action performed"
            assert performed == [first.id, second.id]
        finally:
            rt.shutdown()


def test_an_upgrading_resume_refuses_before_consuming_when_the_agent_left_the_registry(
        daemon: DaemonProcess) -> None:
    performed: list[str] = []
    tool = handle_scoped_approval(performed)
    with ScriptedModelServer() as model:
        llm = {"style": "openai", "base_url": model.url, "model": "m"}
        rt = Runtime.new(target=daemon.target, llm=llm,
                         registry=registry(agent("operator", does="acts", uses={"tools": [tool]})))
        h = rt.spawn(rt.root, "operator")
        rt.wake(h, "act")
        pending = rt.wait(h, timeout=20).pending
        assert pending is not None
        rt.detach()
        other = Runtime.new(target=daemon.target, runtime_id=rt.id, llm=llm,
                            registry=registry(agent("someone", does="else")))
        with pytest.raises(FailedPrecondition, match='runs agent "operator"'):
            other.resume({"id": pending.id, "ok": True}, upgrade=True)
        other.detach()
        again = Runtime.new(target=daemon.target, runtime_id=rt.id, llm=llm,
                            registry=registry(agent("operator", does="acts", uses={"tools": [tool]})))
        try:
            assert again.snapshot(h).state == "suspended"
            result = again.resume({"id": pending.id, "ok": True}, upgrade=True)
            assert not result.duplicate and result.result is not None
            assert result.result.text == "action performed" and performed == [pending.id]
        finally:
            again.shutdown()


def test_reattaching_with_the_same_registry_keeps_model_calls_in_flight(daemon: DaemonProcess) -> None:
    asked = threading.Event()

    def slow(body: JSON) -> Reply:
        asked.set()
        return Reply(body=chat_response(content="slow answer", usage=(1, 1, 2)), delay=1.5)

    with ScriptedModelServer(slow) as model:  # type: ignore[arg-type]
        llm = {"style": "openai", "base_url": model.url, "model": "m", "retries": 0}
        reg = registry(agent("talker", does="talks"))
        rt = Runtime.new(target=daemon.target, registry=reg, llm=llm)
        h = rt.spawn(rt.root, "talker")
        rt.wake(h, "hi")
        assert asked.wait(10)
        again = Runtime.new(target=daemon.target, registry=reg, llm=llm, runtime_id=rt.id)  # an app restart
        try:
            result = again.wait(h, timeout=20)
            assert (result.status, result.text) == ("done", "slow answer"), result
        finally:
            rt.detach()
            again.shutdown()


def test_a_request_id_the_store_cannot_hold_is_that_calls_error(daemon: DaemonProcess) -> None:
    def bad_id(args: dict[str, Any], ctx: Context) -> ToolResult:
        return ToolResult.suspend(kind="authorization", prompt="approve?", id="x" * 300)

    tool = Tool("secret_action", "", {"type": "object", "properties": {}}, execute=bad_id)
    with ScriptedModelServer() as model:
        rt = Runtime.new(target=daemon.target, llm={"style": "openai", "base_url": model.url, "model": "m"},
                         registry=registry(agent("operator", does="acts", uses={"tools": [tool]})))
        try:
            h = rt.spawn(rt.root, "operator")
            rt.wake(h, "act")
            result = rt.wait(h, timeout=20)
            assert result.status == "done" and "pending.id is over 250 bytes" in result.text, result
            assert rt.snapshot(h).state == "idle"
            rt.close(h)  # Close works: nothing is wedged
            assert rt.snapshot(h).state == "closed"
        finally:
            rt.shutdown()
