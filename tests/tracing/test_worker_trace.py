"""Calls sent to the app's workers over ``Connect`` carry the W3C trace context of their span:
a native tool sees the ``traceparent`` of its ``execute_tool`` span (``ctx.traceparent``) and a
worker model transport that of its ``chat`` span (``request["traceparent"]``), so the app's own
spans join the agent's trace. With tracing off both are empty."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.daemon import DaemonProcess
from toolnexus_client import Context, Runtime, Tool, agent, registry
from toolnexus_devtools.model_server import chat_response, tool_call

from .collector import Collector, Span

FAST_EXPORT = {"OTEL_BSP_SCHEDULE_DELAY": "50"}
# version 00, a 32-hex trace id and a 16-hex span id (neither all zeros), the flags
W3C = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$")


@pytest.fixture
def traced(tmp_path: Path, collector: Collector) -> Iterator[DaemonProcess]:
    with DaemonProcess(tmp_path / "data", "--otlp-endpoint", collector.url, env=FAST_EXPORT) as proc:
        yield proc


def run_lookup(target: str) -> tuple[list[str], list[str]]:
    """One turn of an agent whose worker model calls the worker tool ``lookup`` once: the
    traceparents the tool and the model transport were given, in order."""
    tool_seen: list[str] = []
    model_seen: list[str] = []

    def lookup(args: dict[str, Any], ctx: Context) -> str:
        tool_seen.append(ctx.traceparent)
        return "found"

    def transport(request: dict[str, Any]) -> dict[str, Any]:
        model_seen.append(request.get("traceparent", ""))
        if any(m.get("role") == "tool" for m in request["body"]["messages"]):
            return chat_response(content="done")
        return chat_response(tool_calls=[tool_call("lookup", {})])

    lookup_tool = Tool("lookup", "looks it up", {"type": "object", "properties": {}}, lookup)
    finder = agent("finder", does="finds", uses={"tools": [lookup_tool]})
    with Runtime.new(target, registry(finder), transport=transport) as rt:
        result = rt.wake(rt.spawn(rt.root, "finder"), "find it", wait=20).result
        assert result is not None and result.text == "done", result
    return tool_seen, model_seen


def ids(traceparent: str) -> tuple[str, str]:
    m = W3C.match(traceparent)
    assert m is not None, f"not a W3C traceparent: {traceparent!r}"
    return m.group(1), m.group(2)


def test_worker_calls_carry_the_traceparent_of_their_span(traced: DaemonProcess,
                                                          collector: Collector) -> None:
    tool_seen, model_seen = run_lookup(traced.target)
    spans = collector.wait_for(lambda s: any(x.name == "invoke_agent finder" for x in s)
                               and any(x.name == "execute_tool lookup" for x in s))
    turn = next(s for s in spans if s.name == "invoke_agent finder")
    tool_span = next(s for s in spans if s.name == "execute_tool lookup")
    chats: list[Span] = [s for s in spans if s.name.startswith("chat ")]
    assert len(tool_seen) == 1 and len(model_seen) == 2, (tool_seen, model_seen)
    assert ids(tool_seen[0]) == (turn.trace_id, tool_span.span_id), "the execute_tool span's own context"
    for seen in model_seen:
        trace_id, span_id = ids(seen)
        assert trace_id == turn.trace_id
        assert span_id in {c.span_id for c in chats}, "the chat span's own context"
    assert ids(model_seen[0]) != ids(model_seen[1]), "each model call its own span"


def test_without_tracing_the_traceparent_is_empty(tmp_path: Path) -> None:
    with DaemonProcess(tmp_path / "data") as proc:
        tool_seen, model_seen = run_lookup(proc.target)
    assert tool_seen == [""]
    assert model_seen == ["", ""]
