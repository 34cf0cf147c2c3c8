"""What people and scripts read: tables, ages such as "3h ago", and JSON of any reply.

JSON keeps the proto's field names and gives int64 values as numbers (the
proto3 JSON mapping would quote them), so ``jq '.[].pending'`` compares
numbers; JSON-shaped fields (``Struct``) come out as they went in.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import Message

MAX_CELL = 60


def when(rfc3339: str, now: datetime | None = None) -> str:
    """``"3h ago"`` for a time past, ``"in 5m"`` ahead, ``"-"`` for none, the text itself if unparsable."""
    if not rfc3339:
        return "-"
    try:
        at = datetime.fromisoformat(rfc3339.replace("Z", "+00:00"))
    except ValueError:
        return rfc3339
    at = at if at.tzinfo else at.replace(tzinfo=UTC)
    seconds = ((now or datetime.now(UTC)) - at).total_seconds()
    span = _span(abs(seconds))
    return f"{span} ago" if seconds >= 0 else f"in {span}"


def _span(seconds: float) -> str:
    for size, unit in ((86400, "d"), (3600, "h"), (60, "m")):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"


def clip(text: str, width: int = MAX_CELL) -> str:
    """One line of at most ``width`` characters (a prompt can be long and multi-line)."""
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "…"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Columns aligned on the widest cell, two spaces apart, the header in capitals."""
    cells = [[h.upper() for h in headers], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    return "\n".join(lines) + "\n"


def to_json(message: Message) -> dict[str, Any]:
    """Every field of ``message`` (defaults too), by proto name, int64 as numbers."""
    out: dict[str, Any] = {}
    for fd in message.DESCRIPTOR.fields:
        value = getattr(message, fd.name)
        if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
            out[fd.name] = {k: _value(fd.message_type.fields_by_name["value"], v) for k, v in value.items()}
        elif fd.is_repeated:
            out[fd.name] = [_value(fd, v) for v in value]
        elif fd.message_type is not None and not message.HasField(fd.name):
            out[fd.name] = None
        else:
            out[fd.name] = _value(fd, value)
    return out


def _value(fd: Any, value: Any) -> Any:
    if fd.message_type is None:
        return value
    if fd.message_type.full_name == "google.protobuf.Struct":
        return json_format.MessageToDict(value)
    return to_json(value)


def dumps(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False) + "\n"
