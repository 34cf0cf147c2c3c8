"""JSON-lines logging to stderr: the daemon's only log format.

One object per line: ``time`` (RFC 3339), ``level``, ``msg``, plus the
``extra=`` fields a caller passes (``runtime``, ``handle``, ``request_id``,
``call_id``, ``addresses``, ...). Tests and operators parse these lines (the
``serving`` line is how ``tests/support/daemon.py`` learns the bound
addresses). Secrets and answer payloads must never reach a log: extras whose
names look secret-bearing are dropped here as a last line of defence, and
``log_events`` — the engine observer that turns committed events into log
lines — takes ids, kinds, states and outcomes from an event, never its
prompt, data, arguments or result text.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from typing import Any, TextIO

from ..clock import rfc3339
from ..model import Event, EventType

# attributes every LogRecord has; anything else on a record came from ``extra=``
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}
# extras never written, whatever a caller passes: keys, tokens, headers, answer payloads
_SECRET = re.compile(r"key|token|secret|password|authorization|header|answer|arguments|body", re.I)


class JsonFormatter(logging.Formatter):
    """Formats a record as one JSON object; non-JSON extra values are written as strings."""

    # one encoder (``json.dumps`` with options builds a new one per call) and the verdict on each
    # attribute name once: two event lines per agent cycle come through here
    _encoder = json.JSONEncoder(default=str, ensure_ascii=False)
    _written: dict[str, bool] = {}

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {"time": rfc3339(record.created), "level": record.levelname.lower(),
                               "msg": record.getMessage(), "logger": record.name}
        written = self._written
        for name, value in vars(record).items():
            keep = written.get(name)
            if keep is None:
                keep = _extra(name)
                if len(written) < _MAX_NAMES:  # past the bound a name is simply decided each time
                    written[name] = keep
            if keep:
                out[name] = value
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return self._encoder.encode(out)


# attribute names whose verdict is remembered (callers pass a few dozen distinct extras)
_MAX_NAMES = 1024


def _extra(name: str) -> bool:
    """Whether a record attribute is a caller's extra that may be written."""
    return name not in _STANDARD and not name.startswith("_") and not _SECRET.search(name)


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
    # their debug lines are about their own plumbing (one per RPC from grpc): noise in a daemon's log
    for noisy in ("grpc", "asyncio"):
        logging.getLogger(noisy).setLevel(max(logging.INFO, root.level))


events_log = logging.getLogger("toolnexus_daemon.events")


def log_events(runtime_id: str, events: list[Event]) -> None:
    """One line per event worth a line: suspensions and answers at info, the rest at debug."""
    debug = events_log.isEnabledFor(logging.DEBUG)
    for ev in events:
        # the two info lines first, their extras built only for them: most events of a commit
        # write no line unless debug is on
        if ev.type is EventType.PENDING and ev.pending is not None:
            _info("handle suspended", {"runtime": runtime_id, "handle": ev.handle, "seq": ev.seq,
                                       "request_id": ev.pending.id, "kind": ev.pending.kind})
            continue
        if ev.type is EventType.RESUMED:
            data = ev.data or {}
            _info("answer accepted", {"runtime": runtime_id, "handle": ev.handle, "seq": ev.seq,
                                      "request_id": str(data.get("request_id") or ""),
                                      "ok": bool(data.get("ok"))})
            continue
        if not debug:
            continue
        ids: dict[str, Any] = {"runtime": runtime_id, "handle": ev.handle, "seq": ev.seq}
        data = ev.data or {}
        if ev.type is EventType.TRANSITION:
            events_log.debug("transition", extra={**ids, "from": ev.from_state, "to": ev.to_state})
        elif ev.type is EventType.TOOL_RESULT:
            events_log.debug("tool call", extra={**ids, "call_id": data.get("call_id"),
                                                 "tool": data.get("tool"), "source": data.get("source"),
                                                 "outcome": data.get("outcome"),
                                                 "latency_ms": data.get("latency_ms")})
        elif ev.type is EventType.MODEL_CALL:
            usage = data.get("usage") or {}
            events_log.debug("model call", extra={**ids, "usage_total": usage.get("total_tokens"),
                                                  "latency_ms": data.get("latency_ms")})
        elif ev.type is EventType.RESULT and ev.result is not None:
            events_log.debug("turn settled", extra={**ids, "status": str(ev.result.status)})


def _info(msg: str, extra: dict[str, Any]) -> None:
    """``events_log.info(msg, extra=extra)`` without looking up the caller's file and line, which
    ``Logger.info`` does by walking the stack and no line of this log writes: the same record
    otherwise, through the same handlers (two of these lines per agent cycle)."""
    if events_log.isEnabledFor(logging.INFO):
        events_log.handle(events_log.makeRecord(events_log.name, logging.INFO, "(unknown file)", 0, msg, (),
                                                None, "(unknown function)", extra))
