"""The Python clients send the app's current trace context (``traceparent``) when the app uses
OpenTelemetry: the daemon's turn spans are then children of the app's span."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider

from tests.support.daemon import DaemonProcess
from toolnexus_client import Runtime, agent, registry
from toolnexus_client import aio as tn_aio
from toolnexus_devtools import ScriptedModelServer

from .collector import Collector

FAST_EXPORT = {"OTEL_BSP_SCHEDULE_DELAY": "50"}
REGISTRY = registry(agent("plain", does="answers"))


@pytest.fixture
def traced(tmp_path: Path, collector: Collector) -> Iterator[DaemonProcess]:
    with DaemonProcess(tmp_path / "data", "--otlp-endpoint", collector.url, env=FAST_EXPORT) as proc:
        yield proc


def test_the_blocking_client_passes_the_current_span(traced: DaemonProcess, collector: Collector,
                                                      model_server: ScriptedModelServer) -> None:
    tracer = TracerProvider().get_tracer("app")  # the app's own tracer (nothing exported)
    llm = {"style": "openai", "base_url": model_server.url, "model": "scripted"}
    with Runtime.new(target=traced.target, registry=REGISTRY, llm=llm) as rt:
        handle = rt.spawn(rt.root, "plain")
        with tracer.start_as_current_span("app work") as app_span:
            assert rt.wake(handle, "hello", wait=20).result.text == "ok"
    spans = collector.wait_for(lambda s: any(x.name == "invoke_agent plain" for x in s))
    turn = next(s for s in spans if s.name == "invoke_agent plain")
    ctx = app_span.get_span_context()
    assert (turn.trace_id, turn.parent_id) == (f"{ctx.trace_id:032x}", f"{ctx.span_id:016x}")


def test_the_asyncio_client_passes_the_current_span(traced: DaemonProcess, collector: Collector,
                                                     model_server: ScriptedModelServer) -> None:
    tracer = TracerProvider().get_tracer("app")
    llm = {"style": "openai", "base_url": model_server.url, "model": "scripted"}

    async def run() -> int:
        rt = await tn_aio.Runtime.new(target=traced.target, registry=REGISTRY, llm=llm)
        try:
            handle = await rt.spawn(rt.root, "plain")
            with tracer.start_as_current_span("app work") as app_span:
                await rt.wake(handle, "hello", wait=20)
            return app_span.get_span_context().span_id
        finally:
            await rt.detach()

    span_id = asyncio.run(run())
    spans = collector.wait_for(lambda s: any(x.name == "invoke_agent plain" for x in s))
    assert next(s for s in spans if s.name == "invoke_agent plain").parent_id == f"{span_id:016x}"


def test_without_a_current_span_nothing_is_sent(traced: DaemonProcess, collector: Collector,
                                                model_server: ScriptedModelServer) -> None:
    llm = {"style": "openai", "base_url": model_server.url, "model": "scripted"}
    with Runtime.new(target=traced.target, registry=REGISTRY, llm=llm) as rt:
        rt.wake(rt.spawn(rt.root, "plain"), "hello", wait=20)
    spans = collector.wait_for(lambda s: any(x.name == "invoke_agent plain" for x in s))
    assert next(s for s in spans if s.name == "invoke_agent plain").parent_id == ""
