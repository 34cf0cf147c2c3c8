"""The trace flags: ``--otlp-endpoint`` and ``--otel-capture-content`` (docs/observability.md).

Kept beside ``config`` (which calls it). Tracing is off unless an endpoint is configured, by
the flag or by the standard ``OTEL_EXPORTER_OTLP_ENDPOINT`` /
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` that the exporter reads itself.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

# the standard variables that turn tracing on when the flag is not given
ENDPOINT_ENV = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
# what a boolean variable accepts as true (as ``config`` does)
TRUE = ("1", "true", "yes", "on")


@dataclass(frozen=True)
class Tracing:
    # the OTLP/HTTP base URL (``/v1/traces`` is added) or traces URL; "" = the standard variables
    endpoint: str = ""
    # prompts, completions and tool arguments and results go into spans
    capture_content: bool = False

    def on(self, env: Mapping[str, str]) -> bool:
        return bool(self.endpoint or any(env.get(name) for name in ENDPOINT_ENV))


def add_flags(g: argparse._ArgumentGroup, env: Mapping[str, str]) -> None:
    g.add_argument("--otlp-endpoint", default=env.get("TOOLNEXUS_OTLP_ENDPOINT", ""), metavar="URL",
                   help="export OpenTelemetry traces over OTLP/HTTP to this collector, e.g. "
                        "http://127.0.0.1:4318 (env TOOLNEXUS_OTLP_ENDPOINT, or the standard "
                        "OTEL_EXPORTER_OTLP_ENDPOINT; default off)")
    g.add_argument("--otel-capture-content", action="store_true",
                   default=env.get("TOOLNEXUS_OTEL_CAPTURE_CONTENT", "").strip().lower() in TRUE,
                   help="put prompts, completions and tool arguments and results into spans "
                        "(env TOOLNEXUS_OTEL_CAPTURE_CONTENT=1; default off: they may hold personal data)")


def tracing(parser: argparse.ArgumentParser, ns: argparse.Namespace) -> Tracing:
    endpoint = ns.otlp_endpoint.strip()
    if endpoint:
        parts = urlsplit(endpoint)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            parser.error(f"--otlp-endpoint {endpoint!r}: want an http(s) URL of an OTLP/HTTP collector, "
                         "e.g. http://127.0.0.1:4318")
    return Tracing(endpoint=endpoint, capture_content=ns.otel_capture_content)
