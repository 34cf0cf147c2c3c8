"""One access-log line per RPC: method, status code, duration and the ids the request names.

Successful calls log at debug (a busy sidecar answers thousands a second);
refusals log at info with the refusal message, which is written for the
caller and so carries no secret; INTERNAL is logged with its traceback by
``status.abort_with``. Only identifiers are taken from a request — runtime,
handle, request id — never a prompt, an answer's data or any metadata.
"""

from __future__ import annotations

import logging
import time

log = logging.getLogger("toolnexus_daemon.access")


def log_call(method: str, request: object, code: str, started: float, error: Exception | None = None) -> None:
    level = logging.DEBUG if code == "OK" else logging.INFO
    if code == "INTERNAL" or not log.isEnabledFor(level):
        return
    extra: dict[str, object] = {"method": method, "code": code,
                                "duration_ms": round((time.monotonic() - started) * 1000, 2)}
    extra.update(request_ids(request))
    if error is not None:
        extra["error"] = str(error)
    log.log(level, "rpc", extra=extra)


def request_ids(request: object) -> dict[str, str]:
    """The ids a request names, under the log's field names (absent ones left out)."""
    out: dict[str, str] = {}
    for attr, name in (("runtime_id", "runtime"), ("handle", "handle")):
        value: object = getattr(request, attr, "")
        if isinstance(value, str) and value:
            out[name] = value[:200]
    answer: object = getattr(request, "answer", None)
    answer_id: object = getattr(answer, "id", "")
    if isinstance(answer_id, str) and answer_id:
        out["request_id"] = answer_id[:200]
    return out
