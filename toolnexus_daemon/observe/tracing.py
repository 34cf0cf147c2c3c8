"""OpenTelemetry traces of the daemon: the engine's span protocol, exported over OTLP/HTTP.

Built only when an OTLP endpoint is configured (``--otlp-endpoint`` or the standard
``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``); otherwise the
engine keeps its no-op tracer and nothing of the SDK is imported. A span is a light record
(``trace_export.SpanRecord``) made on the event loop: ids, times, attributes, events, a link,
a status — not an SDK span, whose making cost ten times more. Ended records go out through the
SDK's batch processor (its own thread, flushed at shutdown) and the official OTLP/HTTP
exporter (``trace_export``). The daemon installs no global tracer provider and passes trace
context as W3C ``traceparent`` strings, which is what checkpoints store and requests carry.
Sampling is the SDK's: by default a span is recorded unless the caller's ``traceparent`` says
its trace is not sampled; another ``OTEL_TRACES_SAMPLER`` is asked for each span.
"""

from __future__ import annotations

import functools
import os
import random
import re
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any, cast

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider, sampling
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Link, SpanKind
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from ..config_tracing import Tracing
from .trace_export import KINDS, RecordExporter, SpanRecord

# the engine's ``tracing.Tracer`` protocol, met structurally: observability imports no engine
Attrs = Mapping[str, str | int | float | bool | Sequence[str]]

DEFAULT_SERVICE = "toolnexus-daemon"
SCOPE = "toolnexus_daemon"
TRACES_PATH = "/v1/traces"
# how long a stop waits for the spans still batched: a collector that is down must not hold it up
SHUTDOWN_S = 2.0
_SDK_KINDS = {"internal": SpanKind.INTERNAL, "client": SpanKind.CLIENT, "server": SpanKind.SERVER}
_PROPAGATOR = TraceContextTextMapPropagator()
# a traceparent as the W3C propagator reads one (same pattern, length bound and rules: ``ids_of``)
_TRACEPARENT = re.compile(r"^[ \t]*([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})"
                          r"(?:(-.*)|[ \t]*)$")
_TRACEPARENT_MAX = 512
_SAMPLED = 0x01


def traces_url(endpoint: str) -> str:
    """``--otlp-endpoint`` is a base URL like ``OTEL_EXPORTER_OTLP_ENDPOINT``: the signal path is added."""
    base = endpoint.rstrip("/")
    return base if base.endswith(TRACES_PATH) else base + TRACES_PATH


@functools.lru_cache(maxsize=256)  # a turn's traceparent is the parent of each of its calls' spans
def ids_of(traceparent: str) -> tuple[int, int, int] | None:
    """(trace id, span id, flags) of a ``traceparent``; None for "" or a malformed one (as the W3C
    propagator of ``opentelemetry-api`` judges it)."""
    if not traceparent or len(traceparent) > _TRACEPARENT_MAX:
        return None
    m = _TRACEPARENT.search(traceparent)
    if m is None:
        return None
    version, trace_id, span_id, flags, rest = m.groups()
    if version == "ff" or (version == "00" and rest):
        return None
    tid, sid = int(trace_id, 16), int(span_id, 16)
    return (tid, sid, int(flags, 16)) if tid and sid else None


def context_of(traceparent: str) -> Context | None:
    """The OpenTelemetry context a ``traceparent`` names; None for "" or a malformed one."""
    if not traceparent:
        return None
    ctx = _PROPAGATOR.extract({"traceparent": traceparent})
    span_ctx = trace.get_current_span(ctx).get_span_context()
    return ctx if span_ctx.is_valid else None


def _new_id(bits: int) -> int:
    # the SDK's RandomIdGenerator: ``random``, not ``secrets`` (ids are unique, not secret); 0 is invalid
    return random.getrandbits(bits) or 1


class OtelSpan:
    """A span being recorded; ended, its record goes to the batch processor when sampled."""

    __slots__ = ("_processor", "_record", "traceparent")

    def __init__(self, record: SpanRecord, processor: BatchSpanProcessor | None) -> None:
        self._record, self._processor = record, processor
        self.traceparent = record.traceparent

    # an ended record belongs to the batch thread, which may be encoding it: later calls are
    # ignored, as the SDK ignores them on an ended span
    def set(self, attrs: Attrs) -> None:
        if not self._record.end_ns:
            self._record.attrs.update(attrs)

    def event(self, name: str, attrs: Attrs) -> None:
        if not self._record.end_ns:
            self._record.events.append((name, time.time_ns(), dict(attrs)))

    def end(self, error: str = "") -> None:
        rec = self._record
        if rec.end_ns:
            return  # ended once already (the SDK ignores a second end too)
        rec.end_ns = time.time_ns()
        rec.error = error
        if self._processor is not None:
            self._processor.on_end(cast(ReadableSpan, rec))


class OtelTracer:
    """``engine.tracing.Tracer`` exporting to an OTLP/HTTP collector."""

    enabled = True

    def __init__(self, settings: Tracing, env: Mapping[str, str], version: str = "") -> None:
        self.capture_content = settings.capture_content
        resource = Resource.create({SERVICE_NAME: env.get("OTEL_SERVICE_NAME") or DEFAULT_SERVICE})
        endpoint = traces_url(settings.endpoint) if settings.endpoint else None  # None: the variables'
        self._exporter = RecordExporter(endpoint, resource, SCOPE, version)
        self._processor = BatchSpanProcessor(self._exporter)
        sampler = TracerProvider(shutdown_on_exit=False).sampler  # OTEL_TRACES_SAMPLER, as the SDK reads it
        # the default (parent-based, always on) needs only the parent's flag: no SDK call per span
        default = sampler.get_description() == sampling.DEFAULT_ON.get_description()  # type: ignore[no-untyped-call]
        self._sampler = None if default else sampler

    def start(self, name: str, kind: str, attrs: Attrs, *, parent: str = "", link: str = "") -> OtelSpan:
        up, linked = ids_of(parent), ids_of(link)
        trace_id = up[0] if up is not None else _new_id(128)
        attributes = dict(attrs)
        sampled = self._sampled(name, kind, attributes, parent, link, trace_id, up)
        record = SpanRecord(name, KINDS[kind], trace_id, _new_id(64), up[1] if up is not None else 0,
                            linked[:2] if linked is not None else None, attributes, time.time_ns(),
                            _SAMPLED if sampled else 0)
        return OtelSpan(record, self._processor if sampled else None)

    def _sampled(self, name: str, kind: str, attrs: dict[str, Any], parent: str, link: str, trace_id: int,
                 up: tuple[int, int, int] | None) -> bool:
        if self._sampler is None:
            return up is None or bool(up[2] & _SAMPLED)
        linked = context_of(link)
        links = [Link(trace.get_current_span(linked).get_span_context())] if linked is not None else None
        result = self._sampler.should_sample(context_of(parent), trace_id, name, _SDK_KINDS[kind], attrs,
                                             links)
        return bool(result.decision.is_sampled())  # type: ignore[no-untyped-call]

    def shutdown(self) -> None:
        """Export what is batched, waiting at most ``SHUTDOWN_S``; past that (a collector that is down
        or slow) stop retrying and let the export go: its threads do not keep the process up. (The
        SDK's own flush and shutdown wait for the exporter's retries, up to 30 s.)"""
        closing = threading.Thread(target=self._processor.shutdown, name="otel-shutdown", daemon=True)
        closing.start()
        closing.join(SHUTDOWN_S)
        if closing.is_alive():
            self._exporter.shutdown()  # type: ignore[no-untyped-call]


def build(settings: Tracing, env: Mapping[str, str] | None = None, version: str = "") -> OtelTracer | None:
    """The tracer for these settings, or None when tracing is off (the engine keeps its no-op)."""
    environ = os.environ if env is None else env
    if not settings.on(environ):
        return None
    return OtelTracer(settings, environ, version)
