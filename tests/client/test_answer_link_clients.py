"""Answer links through the Python client (docs/protocol.md §10): ``Tool(answer_link=True)`` and
``agent(..., answer_link=True)`` reach the daemon, the suspension the client waits on carries
``Request.answer_url``, and a POST to that link (no runtime key, no grpc) finishes the handle."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.answer_links import ANSWERS_ARGS
from tests.support.daemon import DaemonProcess
from toolnexus_client import Context, Runtime, Tool, ToolResult, agent, registry
from toolnexus_devtools import mock_model

AGENT = "approver"


def approve(args: dict[str, Any], ctx: Context) -> ToolResult | str:
    if ctx.answer is None:
        return ToolResult.suspend(id=f"approve:{ctx.action_id}", kind="approval", prompt="ship it?")
    return "shipped"


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    proc = DaemonProcess(Path(tmp_path_factory.mktemp("links")) / "data", *ANSWERS_ARGS).start()
    try:
        yield proc
    finally:
        proc.stop()


def _parked(daemon: DaemonProcess, *, tool_link: bool, agent_link: bool) -> tuple[Runtime, str, Any]:
    reg = registry(agent(AGENT, uses={"tools": [Tool("approve", execute=approve, answer_link=tool_link)]},
                         answer_link=agent_link))
    rt = Runtime.new(daemon.target, reg, transport=lambda r: {"status": 200, "body": mock_model(r["body"])})
    handle = rt.spawn(rt.root, AGENT)
    rt.wake(handle, "ship the release")
    return rt, handle, rt.wait(handle, timeout=30).pending


@pytest.mark.parametrize(("tool_link", "agent_link"), [(True, False), (False, True)])
def test_a_link_asked_for_by_the_tool_or_the_agent_answers_the_request(
        daemon: DaemonProcess, tool_link: bool, agent_link: bool) -> None:
    rt, handle, pending = _parked(daemon, tool_link=tool_link, agent_link=agent_link)
    try:
        assert pending is not None and pending.answer_url, pending
        assert pending.answer_url.startswith("http://127.0.0.1:") and "/a/" in pending.answer_url
        reply = httpx.post(pending.answer_url, json={"ok": True}, timeout=15)
        assert reply.status_code == 200, reply.text
        assert reply.json()["state"] == "answered"
        done = rt.wait(handle, timeout=30)
        assert (done.status, done.text) == ("done", "shipped")
    finally:
        rt.shutdown()


def test_no_link_unless_asked(daemon: DaemonProcess) -> None:
    rt, _, pending = _parked(daemon, tool_link=False, agent_link=False)
    try:
        assert pending is not None and pending.answer_url is None
    finally:
        rt.shutdown()
