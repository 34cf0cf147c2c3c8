"""The fused calls in both Python clients, against the real daemon: ``spawn(...,
prompt=, wait=)`` and ``wake(..., wait=)`` return a ``Woken`` with the settled result; the old
call shapes still return a handle id and a queued flag."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.test_scenarios import AGENT, PROMPT, secret_action
from tests.support.daemon import DaemonProcess
from toolnexus_client import (
    InvalidArgument,
    Runtime,
    Tool,
    Woken,
    agent,
    aio,
    registry,
)
from toolnexus_devtools import mock_model


def transport(request: dict[str, Any]) -> dict[str, Any]:
    return {"status": 200, "headers": {}, "body": mock_model(request["body"])}


REGISTRY = registry(agent(AGENT, uses={"tools": [Tool("secret_action", execute=secret_action)]}))


def test_blocking_client_runs_the_cycle_in_two_calls(daemon: DaemonProcess) -> None:
    with Runtime.new(daemon.target, REGISTRY, transport=transport) as rt:
        woken = rt.spawn(rt.root, AGENT, prompt=PROMPT, wait=30)
        assert isinstance(woken, Woken) and (woken.handle, woken.queued) == (f"{rt.root}/{AGENT}.1", False)
        assert woken.result is not None and woken.result.pending is not None
        assert (woken.result.status, woken.result.pending.id) == ("pending", f"secret-action:{woken.handle}")
        resumed = rt.resume({"id": woken.result.pending.id, "ok": True})
        assert resumed.result is not None and resumed.result.text == "action performed"

        again = rt.wake(woken.handle, PROMPT, wait=30)
        # the tool's request id is the one already answered: the daemon hands it that answer
        assert isinstance(again, Woken) and again.result is not None
        assert (again.result.status, again.result.text) == ("done", "action performed")
        assert rt.snapshot(woken.handle).last_result == again.result

        # without wait: woken once durable, no result; the old shapes are unchanged
        quick = rt.spawn(rt.root, AGENT, prompt=PROMPT)
        assert isinstance(quick, Woken) and quick.result is None
        assert rt.wait(quick.handle, timeout=30).status == "pending"
        plain = rt.spawn(rt.root, AGENT)
        assert plain == f"{rt.root}/{AGENT}.3"
        assert rt.wake(plain, PROMPT) is False

        with pytest.raises(ValueError, match="prompt is empty"):
            rt.spawn(rt.root, AGENT, prompt="")
        with pytest.raises(InvalidArgument, match="the limit is 3600000"):
            rt.spawn(rt.root, AGENT, prompt=PROMPT, wait=3601)


async def test_asyncio_client_runs_the_cycle_in_two_calls(daemon: DaemonProcess) -> None:
    async with await aio.Runtime.new(daemon.target, REGISTRY, transport=transport) as rt:
        woken = await rt.spawn(rt.root, AGENT, prompt=PROMPT, wait=30)
        assert woken.result is not None and woken.result.pending is not None
        assert woken.result.status == "pending"
        resumed = await rt.resume({"id": woken.result.pending.id, "ok": True})
        assert resumed.result is not None and resumed.result.text == "action performed"

        again = await rt.wake(woken.handle, PROMPT, wait=30)
        assert again.result is not None and again.result.status == "done"
        quick = await rt.spawn(rt.root, AGENT, prompt=PROMPT)
        assert (quick.queued, quick.result) == (False, None)
        plain = await rt.spawn(rt.root, AGENT)
        assert await rt.wake(plain, PROMPT) is False
        with pytest.raises(InvalidArgument, match="must not be negative"):
            await rt.wake(plain, PROMPT, wait=-1)
