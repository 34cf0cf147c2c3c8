"""An MCP tool call carries the trace context of its ``execute_tool`` span out, in ``_meta``
(``traceparent``), as webhook and http tools carry it in a header."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.mcp.conftest import McpServerProcess, Session, calls, mcp_agent, mcp_server
from tests.support.daemon import DaemonProcess
from toolnexus_devtools import ScriptedModelServer

from .collector import Collector, Span
from .test_traces import FAST_EXPORT

__all__ = ["mcp_server"]


@pytest.fixture
def traced(tmp_path: Path, collector: Collector) -> Iterator[DaemonProcess]:
    proc = DaemonProcess(tmp_path / "data", "--otlp-endpoint", collector.url, env=FAST_EXPORT).start()
    try:
        yield proc
    finally:
        proc.stop()


def test_an_mcp_call_sends_its_execute_tool_span_as_traceparent(
        traced: DaemonProcess, mcp_server: McpServerProcess, collector: Collector) -> None:
    with ScriptedModelServer(calls("example__call_info", {})) as model:
        s = Session(traced.target, model.url,
                    mcp_agent({"name": "example", "url": mcp_server.url, "tools": ["call_info"]}))
        _, result = s.run()
        meta = json.loads(result.text)
        s.close()
    sent = re.fullmatch(r"00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}", meta.get("traceparent", ""))
    assert sent is not None, meta

    def the_tool_span(spans: list[Span]) -> bool:
        return any(s.name == "execute_tool example__call_info" for s in spans)

    tool = next(s for s in collector.wait_for(the_tool_span) if s.name == "execute_tool example__call_info")
    assert (tool.trace_id, tool.span_id) == (sent.group(1), sent.group(2))
