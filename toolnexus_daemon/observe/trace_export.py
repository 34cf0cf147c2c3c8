"""The export half of the daemon's traces: finished span records into OTLP protobuf, batched.

``observe.tracing`` records its spans as light ``SpanRecord``s (a few slots, no SDK objects on
the event loop). This module owns what happens after a span ends: the SDK's
``BatchSpanProcessor`` (its own thread, the standard ``OTEL_BSP_*`` settings) batches the
records, and ``RecordExporter`` — the official ``OTLPSpanExporter`` with its endpoint,
headers, TLS, compression, timeout and retries — sends them, encoded straight into the
official ``opentelemetry.proto`` messages (protobuf's C implementation) rather than through
the SDK's pure-Python encoder, which cost several times more per span and held the GIL
against the event loop while it ran.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.exporter.otlp.proto.http._common import RequestPayloadTooLargeError, _is_request_too_large
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ScopeSpans, Span, SpanFlags
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanLimits
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.trace import SpanContext, TraceFlags
from opentelemetry.trace.status import StatusCode

# the span flags the SDK's encoder writes: whether the parent (or linked) context was remote is
# known; and it is remote, as every parent and link here comes from a traceparent string
ROOT_FLAGS = SpanFlags.SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK
REMOTE_FLAGS = ROOT_FLAGS | SpanFlags.SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK
KINDS = {"internal": Span.SpanKind.SPAN_KIND_INTERNAL, "client": Span.SpanKind.SPAN_KIND_CLIENT,
         "server": Span.SpanKind.SPAN_KIND_SERVER}
# what ``BatchSpanProcessor.on_end`` asks of a span: only sampled records are ever handed to it
SAMPLED = SpanContext(1, 1, is_remote=False, trace_flags=TraceFlags(TraceFlags.SAMPLED))


class SpanRecord:
    """A span as the engine recorded it; ``end_ns`` is 0 until it ended."""

    __slots__ = ("attrs", "end_ns", "error", "events", "kind", "link", "name", "parent_id", "span_id",
                 "start_ns", "trace_id", "traceparent")
    context = SAMPLED

    def __init__(self, name: str, kind: int, trace_id: int, span_id: int, parent_id: int,
                 link: tuple[int, int] | None, attrs: dict[str, Any], start_ns: int, flags: int) -> None:
        self.name, self.kind, self.attrs, self.link = name, kind, attrs, link
        self.trace_id, self.span_id, self.parent_id = trace_id, span_id, parent_id
        self.start_ns, self.end_ns = start_ns, 0
        self.events: list[tuple[str, int, dict[str, Any]]] = []
        self.error = ""
        self.traceparent = f"00-{trace_id:032x}-{span_id:016x}-{flags:02x}"


def fill_attributes(kvs: Any, attrs: Mapping[str, Any], limit: int | None = None) -> None:
    """Append ``attrs`` to a repeated ``KeyValue`` field, typed as the SDK's encoder types them;
    strings cut to ``limit`` characters when one is set (the SDK's attribute value length limit)."""
    for key, value in attrs.items():
        if limit is not None:
            value = truncated(value, limit)
        kv = kvs.add()
        kv.key = key
        fill_value(kv.value, value)


def fill_value(out: AnyValue, value: Any) -> None:
    # bool before int: a bool is an int to isinstance
    if isinstance(value, bool):
        out.bool_value = value
    elif isinstance(value, str):
        out.string_value = value
    elif isinstance(value, int):
        out.int_value = value
    elif isinstance(value, float):
        out.double_value = value
    elif isinstance(value, bytes):
        out.bytes_value = value
    else:  # a sequence of the above
        values = out.array_value.values
        for item in value:
            fill_value(values.add(), item)


def truncated(value: Any, limit: int) -> Any:
    if isinstance(value, str):
        return value[:limit]
    if isinstance(value, (list, tuple)):
        return [truncated(v, limit) for v in value]
    return value


class Limits:
    """The SDK's attribute value length limits (``OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT``,
    ``OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT``), applied as the batch is encoded; None: no limit.
    (The count limits, 128 by default, are far above the dozen attributes, one event and one
    link a span of the daemon carries.)"""

    def __init__(self, limits: SpanLimits | None = None) -> None:
        limits = limits or SpanLimits()
        self.span: int | None = limits.max_span_attribute_length
        self.event: int | None = limits.max_attribute_length


NO_LIMITS = Limits(SpanLimits(max_attribute_length=SpanLimits.UNSET,
                              max_span_attribute_length=SpanLimits.UNSET))


def fill_span(out: Span, rec: SpanRecord, limits: Limits = NO_LIMITS) -> None:
    out.trace_id = rec.trace_id.to_bytes(16, "big")
    out.span_id = rec.span_id.to_bytes(8, "big")
    if rec.parent_id:
        out.parent_span_id = rec.parent_id.to_bytes(8, "big")
    out.flags = REMOTE_FLAGS if rec.parent_id else ROOT_FLAGS
    out.name = rec.name
    out.kind = rec.kind  # type: ignore[assignment]  # an enum value held as its int
    out.start_time_unix_nano = rec.start_ns
    out.end_time_unix_nano = rec.end_ns
    fill_attributes(out.attributes, rec.attrs, limits.span)
    for name, at, attrs in rec.events:
        event = out.events.add()
        event.name, event.time_unix_nano = name, at
        fill_attributes(event.attributes, attrs, limits.event)
    if rec.link is not None:
        link = out.links.add()
        link.trace_id = rec.link[0].to_bytes(16, "big")
        link.span_id = rec.link[1].to_bytes(8, "big")
        link.flags = REMOTE_FLAGS
    if rec.error:
        out.status.code = StatusCode.ERROR.value  # type: ignore[assignment]
        out.status.message = rec.error
    else:
        out.status.SetInParent()  # the SDK's encoder always writes a status (unset)


def scope_template(resource: Resource, scope: str, version: str) -> ExportTraceServiceRequest:
    """A request holding only the resource and the instrumentation scope: each batch copies it."""
    request = ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add()
    fill_attributes(resource_spans.resource.attributes, resource.attributes)
    if resource.schema_url:
        resource_spans.schema_url = resource.schema_url
    scope_spans: ScopeSpans = resource_spans.scope_spans.add()
    scope_spans.scope.name = scope
    if version:
        scope_spans.scope.version = version
    return request


def encode(template: ExportTraceServiceRequest, records: Sequence[SpanRecord],
           limits: Limits = NO_LIMITS) -> bytes:
    request = ExportTraceServiceRequest()
    request.CopyFrom(template)
    spans = request.resource_spans[0].scope_spans[0].spans
    for rec in records:
        fill_span(spans.add(), rec, limits)
    return request.SerializeToString()


class RecordExporter(OTLPSpanExporter):
    """The official OTLP/HTTP exporter (its transport, settings and retries), fed ``SpanRecord``s."""

    def __init__(self, endpoint: str | None, resource: Resource, scope: str, version: str) -> None:
        super().__init__(endpoint=endpoint)
        self._template = scope_template(resource, scope, version)
        self._limits = Limits()

    def export(self, spans: Sequence[Any]) -> SpanExportResult:
        """As ``OTLPSpanExporter.export`` (its metrics, size limit and client), with our encoder."""
        if self._shutdown:
            return SpanExportResult.FAILURE
        with self._metrics.export_operation(len(spans)) as result:
            data = encode(self._template, spans, self._limits)
            if _is_request_too_large(data, self._max_request_size):
                result.error = RequestPayloadTooLargeError(
                    f"Serialized span request size {len(data)} bytes exceeds max_request_size "
                    f"{self._max_request_size} bytes.")
                return SpanExportResult.FAILURE
            sent = self._client.export(data)
            if not sent.success:
                result.error = sent.error
                return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS
