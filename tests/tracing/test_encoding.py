"""The daemon's own span records and OTLP encoding beside the SDK's (observe.trace_export).

Spans are light records encoded straight into the official protobuf messages, not SDK spans
through the SDK's encoder: what a collector receives must be the same message the SDK's
encoder makes of the same span, a ``traceparent`` must be read as the W3C propagator reads it,
and sampling must follow the SDK's (the caller's flag, or ``OTEL_TRACES_SAMPLER``).
"""

from __future__ import annotations

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.util.types import AttributeValue

from toolnexus_daemon.config_tracing import Tracing
from toolnexus_daemon.observe import trace_export
from toolnexus_daemon.observe.trace_export import KINDS, SpanRecord, encode, scope_template
from toolnexus_daemon.observe.tracing import Attrs, OtelTracer, context_of, ids_of

from .collector import Collector

TRACE, PARENT, SPAN = 0x4BF92F3577B34DA6A3CE929D0E0E4736, 0xF067AA0BA902B7, 0x1234
LINK_TRACE, LINK_SPAN = 7, 9
UNSAMPLED_CALLER = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"
ATTRS: dict[str, AttributeValue] = {"s": "x", "i": 3, "f": 1.5, "b": True, "a": ["stop", "length"]}
SCOPE = InstrumentationScope("toolnexus_daemon", "1.2.3")


def sdk_span(parent: bool, error: str, kind: str) -> ReadableSpan:
    remote = SpanContext(TRACE, PARENT, is_remote=True, trace_flags=TraceFlags(1)) if parent else None
    link = Link(SpanContext(LINK_TRACE, LINK_SPAN, is_remote=True, trace_flags=TraceFlags(1)))
    return ReadableSpan(
        name="chat m", context=SpanContext(TRACE, SPAN, is_remote=False, trace_flags=TraceFlags(1)),
        parent=remote, resource=RESOURCE, attributes=ATTRS, events=[Event("e", {"k": "v"}, timestamp=15)],
        links=[link], kind={"client": SpanKind.CLIENT, "internal": SpanKind.INTERNAL}[kind],
        instrumentation_scope=SCOPE,
        status=Status(StatusCode.ERROR, error) if error else Status(StatusCode.UNSET),
        start_time=10, end_time=20)


def record(parent: bool, error: str, kind: str) -> SpanRecord:
    rec = SpanRecord("chat m", KINDS[kind], TRACE, SPAN, PARENT if parent else 0, (LINK_TRACE, LINK_SPAN),
                     dict(ATTRS), 10, 1)
    rec.events.append(("e", 15, {"k": "v"}))
    rec.end_ns, rec.error = 20, error
    return rec


RESOURCE = Resource.create({"service.name": "svc"})


@pytest.mark.parametrize(("parent", "error", "kind"),
                         [(False, "", "internal"), (True, "", "client"), (True, "tool error", "internal")])
def test_a_record_encodes_as_the_sdk_encodes_its_span(parent: bool, error: str, kind: str) -> None:
    ours = ExportTraceServiceRequest.FromString(
        encode(scope_template(RESOURCE, SCOPE.name, SCOPE.version or ""), [record(parent, error, kind)]))
    theirs = ExportTraceServiceRequest.FromString(
        encode_spans([sdk_span(parent, error, kind)]).SerializeToString())
    assert ours == theirs


TRACEPARENTS = [
    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00",
    "  00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\t",
    "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-future",
    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
    "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
    "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
    "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
    "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-" + "x" * 600,
    "not a traceparent", "",
]


@pytest.mark.parametrize("traceparent", TRACEPARENTS)
def test_a_traceparent_is_read_as_the_w3c_propagator_reads_it(traceparent: str) -> None:
    ctx = context_of(traceparent)
    if ctx is None:
        assert ids_of(traceparent) is None
        return
    from opentelemetry import trace
    sc = trace.get_current_span(ctx).get_span_context()
    assert ids_of(traceparent) == (sc.trace_id, sc.span_id, int(sc.trace_flags))


def spans_of(tracer: OtelTracer, collector: Collector, parent: str) -> tuple[str, list[str]]:
    span = tracer.start("chat m", "client", {"gen_ai.operation.name": "chat"}, parent=parent)
    span.set({"gen_ai.usage.input_tokens": 1})
    span.end()
    tracer.shutdown()
    return span.traceparent, [s.name for s in collector.spans]


def test_an_unsampled_caller_gets_an_unsampled_span_that_is_not_exported(collector: Collector) -> None:
    tracer = OtelTracer(Tracing(endpoint=collector.url), {})
    traceparent, exported = spans_of(tracer, collector, UNSAMPLED_CALLER)
    assert exported == []
    assert traceparent.startswith("00-4bf92f3577b34da6a3ce929d0e0e4736-") and traceparent.endswith("-00")


def test_a_sampled_span_is_exported_with_its_attributes(collector: Collector) -> None:
    tracer = OtelTracer(Tracing(endpoint=collector.url), {}, version="9.9")
    traceparent, exported = spans_of(tracer, collector, "")
    assert exported == ["chat m"]
    (span,) = collector.spans
    assert traceparent == f"00-{span.ids}-01"
    assert span.attributes == {"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 1}


def test_the_standard_sampler_variable_is_honoured(collector: Collector,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "always_off")
    tracer = OtelTracer(Tracing(endpoint=collector.url), {})
    traceparent, exported = spans_of(tracer, collector, "")
    assert exported == [] and traceparent.endswith("-00")


def test_the_attribute_value_length_limit_is_honoured(collector: Collector,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", "3")
    tracer = OtelTracer(Tracing(endpoint=collector.url), {})
    attrs: Attrs = {"long": "abcdef", "many": ["abcdef", "xy"], "n": 12345}
    span = tracer.start("execute_tool t", "internal", attrs)
    span.event("toolnexus.suspended", {"toolnexus.request.id": "abcdef"})
    span.end()
    tracer.shutdown()
    (got,) = collector.spans
    assert got.attributes == {"long": "abc", "many": ["abc", "xy"], "n": 12345}
    assert got.events == [("toolnexus.suspended", {"toolnexus.request.id": "abc"})]


def test_the_batch_goes_through_the_official_exporter() -> None:
    assert issubclass(trace_export.RecordExporter, OTLPSpanExporter)


def test_an_ended_span_takes_nothing_more(collector: Collector) -> None:
    tracer = OtelTracer(Tracing(endpoint=collector.url), {})
    span = tracer.start("chat m", "client", {"a": "1"})
    span.end()
    span.set({"late": "x"})
    span.event("late", {})
    span.end(error="late")
    tracer.shutdown()
    (got,) = collector.spans
    assert (got.attributes, got.events, got.status) == ({"a": "1"}, [], 0)
