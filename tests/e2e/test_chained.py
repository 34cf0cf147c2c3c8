"""Chained approvals through the Python client and a real daemon, across a kill -9.

A manager approves, then a director: the tool, re-invoked with the manager's ``ok``, suspends again
under a different request id. That second suspension is durable like the first — parked, announced
on Watch, answerable after the daemon was killed between the two answers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.daemon import DaemonProcess
from toolnexus_client import Context, Runtime, Tool, ToolResult, agent, registry
from toolnexus_devtools import ScriptedModelServer

CHAIN = ("manager", "director")


def approve_twice(args: dict[str, Any], ctx: Context) -> ToolResult | str:
    """Asks the manager, then the director, each under its own id; then acts."""
    asked = 0 if ctx.answer is None else CHAIN.index(ctx.answer.id.split(":")[0]) + 1
    if asked < len(CHAIN):
        who = CHAIN[asked]
        return ToolResult.suspend(kind="approval", prompt=f"{who}: approve?", id=f"{who}:{ctx.call_id}")
    return "approved by manager and director"


def _registry() -> Any:
    schema = {"type": "object", "properties": {}}
    tool = Tool("release", "needs two approvals", schema, execute=approve_twice)
    return registry(agent("releaser", does="releases", uses={"tools": [tool]}))


@pytest.mark.parametrize("kill", [False, True], ids=["one-daemon", "kill-9-between-answers"])
def test_a_second_approval_is_a_durable_suspension_of_the_same_call(tmp_path: Path, kill: bool) -> None:
    with ScriptedModelServer() as model:
        llm = {"style": "openai", "base_url": model.url, "model": "m"}
        proc = DaemonProcess(tmp_path / "data").start()
        rt = Runtime.new(target=proc.target, registry=_registry(), llm=llm)
        try:
            h = rt.spawn(rt.root, "releaser")
            rt.wake(h, "release it")
            first = rt.wait(h, timeout=20).pending
            assert first is not None and first.prompt == "manager: approve?"
            second = rt.resume({"id": first.id, "ok": True}).result
            assert second is not None and second.status == "pending" and second.pending is not None
            assert second.pending.prompt == "director: approve?" and second.pending.id != first.id
            assert rt.snapshot(h).state == "suspended"
            if kill:
                rt.detach()
                proc.kill9()
                proc = DaemonProcess(tmp_path / "data").start()
                rt = Runtime.new(target=proc.target, registry=_registry(), llm=llm, runtime_id=rt.id)
            events = rt.watch(types=["pending"])
            announced = [next(iter(events)).pending, next(iter(events)).pending]
            events.cancel()
            prompts = [p.prompt for p in announced if p is not None]
            assert prompts == ["manager: approve?", "director: approve?"]
            done = rt.resume({"id": second.pending.id, "ok": True}).result
            assert done is not None
            assert (done.status, done.text) == ("done", "approved by manager and director")
            assert model.calls == 2  # the chain never went back to the model
        finally:
            rt.shutdown()
            proc.stop()
