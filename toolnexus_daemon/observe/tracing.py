"""OpenTelemetry traces of the daemon: the engine's span protocol on the official SDK.

Built only when an OTLP endpoint is configured (``--otlp-endpoint`` or the standard
``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``); otherwise the
engine keeps its no-op tracer and nothing of the SDK is imported. Spans go out over OTLP/HTTP
through a batch processor (its own thread), flushed at shutdown. The daemon keeps its own
tracer provider — it does not install a global one — and passes trace context as W3C
``traceparent`` strings, which is what checkpoints store and requests carry.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Link, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from ..config_tracing import Tracing

# the engine's ``tracing.Tracer`` protocol, met structurally: observability imports no engine
Attrs = Mapping[str, str | int | float | bool | Sequence[str]]

DEFAULT_SERVICE = "toolnexus-daemon"
TRACES_PATH = "/v1/traces"
# how long a stop waits for the spans still batched: a collector that is down must not hold it up
SHUTDOWN_S = 2.0
_KINDS = {"internal": SpanKind.INTERNAL, "client": SpanKind.CLIENT, "server": SpanKind.SERVER}
_PROPAGATOR = TraceContextTextMapPropagator()


def traces_url(endpoint: str) -> str:
    """``--otlp-endpoint`` is a base URL like ``OTEL_EXPORTER_OTLP_ENDPOINT``: the signal path is added."""
    base = endpoint.rstrip("/")
    return base if base.endswith(TRACES_PATH) else base + TRACES_PATH


def context_of(traceparent: str) -> Context | None:
    """The OpenTelemetry context a ``traceparent`` names; None for "" or a malformed one."""
    if not traceparent:
        return None
    ctx = _PROPAGATOR.extract({"traceparent": traceparent})
    span_ctx = trace.get_current_span(ctx).get_span_context()
    return ctx if span_ctx.is_valid else None


def traceparent_of(span_ctx: trace.SpanContext) -> str:
    return f"00-{span_ctx.trace_id:032x}-{span_ctx.span_id:016x}-{int(span_ctx.trace_flags):02x}"


class OtelSpan:
    __slots__ = ("_span", "traceparent")

    def __init__(self, span: trace.Span) -> None:
        self._span = span
        self.traceparent = traceparent_of(span.get_span_context())

    def set(self, attrs: Attrs) -> None:
        self._span.set_attributes(dict(attrs))

    def event(self, name: str, attrs: Attrs) -> None:
        self._span.add_event(name, dict(attrs))

    def end(self, error: str = "") -> None:
        if error:
            self._span.set_status(Status(StatusCode.ERROR, error))
        self._span.end()


class OtelTracer:
    """``engine.tracing.Tracer`` exporting to an OTLP/HTTP collector."""

    enabled = True

    def __init__(self, settings: Tracing, env: Mapping[str, str], version: str = "") -> None:
        self.capture_content = settings.capture_content
        resource = Resource.create({SERVICE_NAME: env.get("OTEL_SERVICE_NAME") or DEFAULT_SERVICE})
        self._provider = TracerProvider(resource=resource)
        endpoint = traces_url(settings.endpoint) if settings.endpoint else None  # None: the variables'
        self._exporter = OTLPSpanExporter(endpoint=endpoint)
        self._provider.add_span_processor(BatchSpanProcessor(self._exporter))
        self._tracer = self._provider.get_tracer("toolnexus_daemon", version)

    def start(self, name: str, kind: str, attrs: Attrs, *, parent: str = "", link: str = "") -> OtelSpan:
        linked = context_of(link)
        links = [Link(trace.get_current_span(linked).get_span_context())] if linked is not None else None
        span = self._tracer.start_span(name, context=context_of(parent) or _ROOT, kind=_KINDS[kind],
                                       attributes=dict(attrs), links=links)
        return OtelSpan(span)

    def shutdown(self) -> None:
        """Export what is batched, waiting at most ``SHUTDOWN_S``; past that (a collector that is down
        or slow) stop retrying and let the export go: its threads do not keep the process up. (The
        SDK's own flush and shutdown wait for the exporter's retries, up to 30 s.)"""
        closing = threading.Thread(target=self._provider.shutdown, name="otel-shutdown", daemon=True)
        closing.start()
        closing.join(SHUTDOWN_S)
        if closing.is_alive():
            self._exporter.shutdown()  # type: ignore[no-untyped-call]


# an empty context: a span started under it is a root (never the thread's current span)
_ROOT = trace.set_span_in_context(trace.INVALID_SPAN)


def build(settings: Tracing, env: Mapping[str, str] | None = None, version: str = "") -> OtelTracer | None:
    """The tracer for these settings, or None when tracing is off (the engine keeps its no-op)."""
    environ = os.environ if env is None else env
    if not settings.on(environ):
        return None
    return OtelTracer(settings, environ, version)
