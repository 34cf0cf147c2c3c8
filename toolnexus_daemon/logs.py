"""JSON-lines logging to stderr: the daemon's only log format.

One object per line: ``time`` (RFC 3339), ``level``, ``msg``, plus the
``extra=`` fields a caller passes (``runtime``, ``handle``, ``request_id``,
``call_id``, ``addresses``, ...). Tests and operators parse these lines (the
``serving`` line is how ``tests/support/daemon.py`` learns the bound
addresses). Secrets and answer payloads must never reach a log: extras whose
names look secret-bearing are dropped here as a last line of defence.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from typing import Any, TextIO

from .clock import rfc3339

# attributes every LogRecord has; anything else on a record came from ``extra=``
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}
# extras never written, whatever a caller passes: keys, tokens, headers, answer payloads
_SECRET = re.compile(r"key|token|secret|password|authorization|header|answer|arguments|body", re.I)


class JsonFormatter(logging.Formatter):
    """Formats a record as one JSON object; non-JSON extra values are written as strings."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {"time": rfc3339(record.created), "level": record.levelname.lower(),
                               "msg": record.getMessage(), "logger": record.name}
        for name, value in vars(record).items():
            if name not in _STANDARD and not name.startswith("_") and not _SECRET.search(name):
                out[name] = value
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str, ensure_ascii=False)


def configure(level: str = "info", stream: TextIO | None = None) -> None:
    """Route every logger (ours, grpc's, httpx's) through one JSON handler at ``level``."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # httpx logs every request URL at info, and a URL can carry a query-string secret
    logging.getLogger("httpx").setLevel(logging.WARNING)
    logging.getLogger("httpcore").setLevel(logging.WARNING)
