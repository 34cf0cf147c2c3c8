"""What people and scripts read: tables, ages such as "3h ago", and JSON of any reply.

Ids, kinds, prompts and event text come from models, tools and callers, and a terminal obeys
the control characters in what it prints (a CSI sequence rewrites the screen, an OSC 52 one
writes the clipboard). So every character a command prints goes through ``visible`` (``out`` and
``err`` are the only writers): ESC shows as ``\\e``, other C0 characters and DEL as ``^X``,
``\\r`` ``\\n`` ``\\t`` as themselves escaped, C1 characters (U+0080-U+009F), line and
paragraph separators and bidirectional overrides as ``\\xNN`` / ``\\uNNNN``. A backslash in
the text itself is shown as it is.

JSON keeps the proto's field names and gives int64 values as numbers (the
proto3 JSON mapping would quote them), so ``jq '.[].pending'`` compares
numbers. The commands hold the Python client's values, not messages: ``to_json``
gives them the shape of the message they came from (every field, an absent
message as null, ``from`` for an inbox item's sender, a version nested as the
proto nests it), so the JSON is the wire's whatever the client calls its
fields. JSON-shaped fields (``Struct``) come out as they went in, and every
control character inside a string (C1 and U+2028/U+2029 too, which ``json``
leaves raw) is a ``\\u`` escape, so the text parses back exactly.
"""

from __future__ import annotations

import dataclasses
import json
import re
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import Message

from toolnexus_client import (
    Created,
    DefinitionChange,
    Event,
    InboxItem,
    PendingItem,
    Request,
    TaskResult,
    VersionUse,
)

MAX_CELL = 60
WIDTH = 100  # what a table or a line of a people command takes at most
MIN_FLEX = 12  # the narrowest the clipped column of a table gets

# what a terminal may act on: C0 (but the newline between output lines), DEL, C1, and the
# characters that reorder or break lines of text around them (U+2028/9, bidi controls)
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")
_UNSAFE_IN_LINES = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")
_NAMED = {"\x1b": "\\e", "\r": "\\r", "\n": "\\n", "\t": "\\t", "\x7f": "^?"}
# in JSON: what json.dumps(ensure_ascii=False) leaves raw inside a string
_JSON_RAW = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")


def _shown(match: re.Match[str]) -> str:
    ch = match.group()
    named = _NAMED.get(ch)
    if named is not None:
        return named
    code = ord(ch)
    if code < 0x20:
        return "^" + chr(code + 0x40)  # BEL is ^G, NUL ^@
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def visible(text: str) -> str:
    """``text`` on one line with every control character shown, not obeyed."""
    return _UNSAFE.sub(_shown, text)


def visible_lines(text: str) -> str:
    """``visible`` for output made of lines: the newlines between them stay (cells never hold one:
    ``clip`` and ``table`` made their text visible already)."""
    return _UNSAFE_IN_LINES.sub(_shown, text)


def out(text: str, end: str = "\n") -> None:
    """Print ``text`` to stdout, control characters shown (the one way a command writes there)."""
    sys.stdout.write(visible_lines(text) + end)
    sys.stdout.flush()


def err(text: str) -> None:
    """One line to stderr, control characters shown: messages quote the daemon, which quotes
    tools and callers."""
    sys.stderr.write(visible(text) + "\n")
    sys.stderr.flush()


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
    """One line of at most ``width`` characters (a prompt can be long and multi-line): runs of
    spaces, tabs and newlines become one space, every other control character is shown."""
    line = visible(re.sub("[ \t\n]+", " ", text).strip())
    return line if len(line) <= width else line[: width - 1] + "…"



def fit(line: str, width: int = WIDTH) -> str:
    """``line`` clipped to ``width`` characters."""
    return line if len(line) <= width else line[: width - 1] + "…"


def plural(n: int, unit: str) -> str:
    """``"1 turn"``, ``"2 turns"``."""
    return f"{n} {unit}" if n == 1 else f"{n} {unit}s"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], flex: int | None = None,
          width: int = WIDTH) -> str:
    """Columns aligned on the widest cell, two spaces apart, the header in capitals. Column
    ``flex`` (free text, such as a prompt) is clipped so the table fits ``width`` columns;
    the others (ids to copy) are shown whole."""
    cells = [[h.upper() for h in headers], *[[visible(str(c)) for c in row] for row in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    if flex is not None:
        room = width - sum(w for i, w in enumerate(widths) if i != flex) - 2 * (len(headers) - 1)
        widths[flex] = min(widths[flex], max(MIN_FLEX, room))
        for r in cells:
            r[flex] = fit(r[flex], widths[flex])
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    return "\n".join(lines) + "\n"


def result_line(handle: str, result: TaskResult) -> str:
    """A ``TaskResult`` on one line: ``handle: done "text"``, or what it now waits on."""
    line = f"{visible(handle)}: {visible(result.status)}"
    if result.pending is not None and result.status == "pending":
        p = result.pending
        return f"{line} on {visible(p.kind or 'request')} {visible(p.id)}: \"{clip(p.prompt, 50)}\""
    return line + (f" \"{clip(result.text)}\"" if result.text else "")


def to_json(value: Any) -> dict[str, Any]:
    """A client value (a frozen dataclass) or a message as the message's JSON: see the module."""
    if isinstance(value, Message):
        return _message_json(value)
    shaped = _SHAPES.get(type(value))
    if shaped is not None:
        return shaped(value)
    return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_json(value)
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _struct(value: Any) -> Any:
    """A ``Struct``'s JSON as the message has it: every number a double (the client gives the
    integral ones as ints, ``5``; the proto's JSON, and so these commands, say ``5.0``)."""
    if isinstance(value, dict):
        return {k: _struct(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_struct(v) for v in value]
    return float(value) if isinstance(value, int) and not isinstance(value, bool) else value


def _request(r: Request) -> dict[str, Any]:
    # the proto's strings are never absent: the client's None is the message's ""
    return {"id": r.id, "kind": r.kind, "prompt": r.prompt, "url": r.url or "", "data": _struct(r.data),
            "expires_at": r.expires_at or "", "answer_url": r.answer_url or ""}


def _event(e: Event) -> dict[str, Any]:
    return {**{f.name: _plain(getattr(e, f.name)) for f in dataclasses.fields(e)}, "data": _struct(e.data)}


def _pending_item(i: PendingItem) -> dict[str, Any]:
    return {**{f.name: _plain(getattr(i, f.name)) for f in dataclasses.fields(i)},
            "expires_at": i.expires_at or ""}


def _definition_change(c: DefinitionChange) -> dict[str, Any]:
    return {"part": c.part, "name": c.name, "change": c.change, "added": list(c.added),
            "removed": list(c.removed), "retyped": list(c.retyped), "refuses_resume": c.refuses_resume,
            "summary": c.summary}


def _version_use(v: VersionUse) -> dict[str, Any]:
    return {"version": {"number": v.number, "digest": v.digest, "created_at": v.created_at},
            "handles": v.handles, "latest": v.latest}


def _created(c: Created) -> dict[str, Any]:
    return {"runtime_id": c.runtime_id, "root": c.root, "reattached": c.reattached,
            "version": {"number": c.version, "digest": c.version_digest, "created_at": c.version_created_at}}


_SHAPES: dict[type, Callable[[Any], dict[str, Any]]] = {
    Request: _request,
    Event: _event,
    PendingItem: _pending_item,
    DefinitionChange: _definition_change,
    VersionUse: _version_use,
    Created: _created,
    InboxItem: lambda i: {"from": i.sender, "channel": i.channel, "text": i.text},
}


def _message_json(message: Message) -> dict[str, Any]:
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
    return _message_json(value)


def dumps(value: Any) -> str:
    """Indented JSON, non-ASCII text as it is, every control character escaped."""
    return _escaped(json.dumps(value, indent=2, ensure_ascii=False)) + "\n"


def dumps_line(value: Any) -> str:
    """One JSON value on one line (a stream of them is what ``jq`` reads as it comes)."""
    return _escaped(json.dumps(value, ensure_ascii=False))


def _escaped(text: str) -> str:
    # these characters can only stand inside strings of the dumped JSON, where \\u is their
    # exact equivalent (C0 and the quote json.dumps escaped already)
    return _JSON_RAW.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
