"""``Daemon`` / ``aio.Daemon`` on one runtime named by id, against the real daemon and scripted model:
a runtime made from a registry's JSON, a handle spawned and woken with a wait, read back (handles,
snapshot, versions, events), answered with ``resume``, posted to, closed, and the runtime purged."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.daemon import DaemonProcess
from toolnexus_client import Created, Daemon, aio
from toolnexus_client.errors import FailedPrecondition, NotFound
from toolnexus_devtools import ScriptedModelServer


@pytest.fixture
def model() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as srv:
        yield srv


def _definition(model: ScriptedModelServer) -> dict[str, Any]:
    """A registry file's JSON: one agent whose webhook tool suspends until approved."""
    tool = {"name": "approve", "description": "asks a human", "source": "webhook",
            "input_schema": {"type": "object", "properties": {}}, "http": {"url": model.approval_url}}
    return {"agents": [{"name": "approver", "does": "needs approval", "tools": [tool]}],
            "llm": {"style": "openai", "base_url": model.url, "model": "scripted", "timeout_ms": 5000}}


def test_the_blocking_daemon_drives_a_runtime_by_id(daemon: DaemonProcess,
                                                     model: ScriptedModelServer) -> None:
    with Daemon(daemon.target) as d:
        made = d.new_runtime(_definition(model), runtime_id="by-id-blocking")
        assert isinstance(made, Created) and (made.runtime_id, made.root, made.reattached) == (
            "by-id-blocking", "root", False)
        assert made.version == 1 and len(made.version_digest) == 64 and made.version_created_at
        rid = made.runtime_id
        woken = d.spawn(rid, "", "approver", prompt="go", wait=20, timeout=40)
        assert woken.result is not None and woken.result.status == "pending" and woken.result.pending
        handle, request_id = woken.handle, woken.result.pending.id
        assert [h.id for h in d.list_handles(rid)] == [handle]
        assert d.snapshot(rid, handle).state == "suspended"
        [version] = d.list_versions(rid)
        assert (version.number, version.handles, version.latest) == (1, 1, True)
        stream = d.watch(rid, types=["pending"], reopen=False)
        first = next(stream)
        stream.cancel()
        assert (first.type, first.pending and first.pending.id) == ("pending", request_id)
        assert d.post(rid, handle, "later", sender="ops", channel="chat").position == 1
        answered = d.resume(rid, {"id": request_id, "ok": True}, accept_changed_definition=True)
        assert answered.result is not None and answered.result.status == "done"
        with pytest.raises(FailedPrecondition):
            d.interrupt(rid, handle)  # idle: nothing to interrupt
        assert d.wake(rid, handle, "again").queued is False
        d.close_handle(rid, handle)
        d.shutdown_runtime(rid, purge=True)
        with pytest.raises(NotFound):
            d.snapshot(rid, handle)
        with pytest.raises(ValueError, match="colour"):
            d.new_runtime({"agents": [], "colour": "blue"})  # refused before anything is sent


def test_the_asyncio_daemon_drives_a_runtime_by_id(daemon: DaemonProcess,
                                                    model: ScriptedModelServer) -> None:
    async def go() -> None:
        async with aio.Daemon(daemon.target) as d:
            rid = (await d.new_runtime(_definition(model), runtime_id="by-id-aio")).runtime_id
            handle = (await d.spawn(rid, "", "approver")).handle
            assert (await d.wake(rid, handle, "go")).queued is False
            stream = d.watch(rid, types=["pending"])
            request_id = (await anext(stream)).pending.id  # type: ignore[union-attr]
            stream.cancel()
            assert [h.state for h in await d.list_handles(rid)] == ["suspended"]
            assert (await d.snapshot(rid, handle)).pending is not None
            assert [v.latest for v in await d.list_versions(rid)] == [True]
            answered = await d.resume(rid, {"id": request_id, "ok": False}, upgrade=False)
            assert answered.result is not None
            assert (await d.post(rid, handle, "note")).inbox_cap > 0
            with pytest.raises(FailedPrecondition):
                await d.interrupt(rid, handle)
            await d.close_handle(rid, handle)
            await d.shutdown_runtime(rid)
    asyncio.run(go())
