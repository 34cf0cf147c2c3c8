"""Protobuf <-> domain values: the one place generated messages and ``model`` types meet.

Registry messages (``AgentDef``, ``LlmConfig``, ...) have their own module,
``api.registry``, because they also validate; this one holds the values that
travel on every call: Struct, Request, Answer, TaskResult, HandleSnapshot,
Event, InboxItem. Strings of the pinned vocabularies pass through unchanged.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from google.protobuf import struct_pb2

from ..bounds import bounded_output
from ..engine.definitions.fingerprint import DefinitionChange
from ..engine.state.handle import Handle
from ..errors import InvalidArgument
from ..model import JSON, Answer, Event, EventType, InboxItem, Request, TaskResult
from ._gen import runtime_pb2 as pb

# Struct numbers are doubles; larger integers than this would not survive the round trip anyway
_MAX_EXACT = 2**53


# Reads never fail on a stored value that breaks today's bounds (records written before the
# bounds, or by hand): oversized text is cut with a marker, out-of-range integers are clamped,
# data nested deeper than protobuf parses is replaced by a note saying so.
READ_TEXT_BYTES = 1 << 20
READ_FIELD_BYTES = 64 << 10
READ_STRUCT_DEPTH = 64
_INT64_MAX = 2**63 - 1
_INT32_MAX = 2**31 - 1


def to_struct(value: JSON | None) -> struct_pb2.Struct:
    """A Struct holding ``value`` (empty for None); non-JSON leaves become strings."""
    out = struct_pb2.Struct()
    fill_struct(out, value)
    return out


def fill_struct(out: struct_pb2.Struct, value: JSON | None) -> None:
    """Write ``value`` into the empty Struct ``out`` as ``to_struct`` would: in place, so a Struct
    field of a message being built is filled without a copy of the whole tree.

    One pass (``_fill``) both copies and bounds the nesting: a separate depth walk and then
    ``Struct.update`` cost twice as much, and every model and tool call to a worker comes here.
    """
    if not value:
        return
    if not isinstance(value, dict):
        _unreadable(out)
        return
    try:
        _fill(out, value, 1)
    except _TooDeep:
        _unreadable(out)
    except (ValueError, TypeError):
        out.Clear()
        _fill(out, json.loads(json.dumps(value, default=str)), 1)


class _TooDeep(Exception):
    """The value nests deeper than ``READ_STRUCT_DEPTH`` levels of dicts and lists."""


def _unreadable(out: struct_pb2.Struct) -> None:
    out.Clear()
    out.fields["unreadable"].string_value = (
        f"a value nested deeper than {READ_STRUCT_DEPTH} levels, or not an object")


def _fill(out: struct_pb2.Struct, value: dict[str, Any], depth: int) -> None:
    """Copy the dict ``value``, at nesting ``depth`` (1 at the top), into the empty ``out``."""
    fields = out.fields
    for key, item in value.items():
        _set(fields[key], item, depth)


def _set(target: struct_pb2.Value, item: Any, depth: int) -> None:
    """What ``Struct.update`` does with one value (same kinds, same errors), with the depth bound."""
    if item is None:
        target.null_value = struct_pb2.NULL_VALUE
    elif item is True or item is False:
        target.bool_value = item
    elif isinstance(item, str):
        target.string_value = item
    elif isinstance(item, int | float):
        target.number_value = item
    elif isinstance(item, dict):
        if depth >= READ_STRUCT_DEPTH:
            raise _TooDeep
        child = target.struct_value
        if item:
            _fill(child, item, depth + 1)
        else:
            child.Clear()  # an empty Struct still has to become the value's kind
    elif isinstance(item, list | tuple):
        if depth >= READ_STRUCT_DEPTH:
            raise _TooDeep
        listed = target.list_value
        if item:
            add = listed.values.add
            for element in item:
                _set(add(), element, depth + 1)
        else:
            listed.Clear()
    else:
        raise ValueError("Unexpected type")


def read_text(value: object, limit: int = READ_FIELD_BYTES) -> str:
    """A stored text as the wire may carry it: a string, at most ``limit`` bytes."""
    text = value if isinstance(value, str) else ("" if value is None else json.dumps(value, default=str))
    return bounded_output(text, limit)


def read_count(value: object, ceiling: int = _INT64_MAX) -> int:
    """A stored counter clamped to what its field carries (int64 unless ``ceiling`` says int32)."""
    return min(max(int(value), 0), ceiling) if isinstance(value, int | float) else 0


def from_struct(value: struct_pb2.Struct) -> JSON:
    """A dict from a Struct, integral numbers turned back into ints (``3.0`` → ``3``).

    What ``json_format.MessageToDict`` followed by a pass turning floats into ints gave, in one
    direct pass at well under half the cost (every model reply and tool outcome comes here).
    """
    return {key: _plain(item) for key, item in value.fields.items()}


def _plain(value: struct_pb2.Value) -> Any:
    which = value.WhichOneof("kind")
    if which == "string_value":
        return value.string_value
    if which == "number_value":
        number = value.number_value
        if number.is_integer():
            return int(number) if abs(number) <= _MAX_EXACT else number
        if not math.isfinite(number):  # ``decode`` refuses these first; this is the backstop
            raise InvalidArgument("a Struct holds NaN or Infinity, which JSON cannot carry")
        return number
    if which == "bool_value":
        return value.bool_value
    if which == "struct_value":
        return {key: _plain(item) for key, item in value.struct_value.fields.items()}
    if which == "list_value":
        return [_plain(item) for item in value.list_value.values]
    return None  # null_value, or no kind at all (MessageToDict reads both as JSON null)


def optional_struct(msg: Any, name: str) -> JSON | None:
    """The Struct field ``name`` of ``msg`` as a dict, or None when it is unset."""
    return from_struct(getattr(msg, name)) if msg.HasField(name) else None


# ---------------------------------------------------------------- Request / Answer


def request_to(req: Request) -> pb.Request:
    msg = pb.Request(id=read_text(req.id), kind=read_text(req.kind), prompt=read_text(req.prompt),
                     url=read_text(req.url), expires_at=read_text(req.expires_at),
                     answer_url=read_text(req.answer_url))
    if req.data:
        msg.data.CopyFrom(to_struct(req.data))
    return msg


def request_from(msg: pb.Request) -> Request:
    return Request(id=msg.id, kind=msg.kind, prompt=msg.prompt, url=msg.url or None,
                   data=optional_struct(msg, "data") or None, expires_at=msg.expires_at or None)


def answer_from(msg: pb.Answer, *, require_id: bool = True) -> Answer:
    if require_id and not msg.id:
        raise InvalidArgument("answer.id is required: the id of the pending Request being answered")
    return Answer(id=msg.id, ok=msg.ok, data=optional_struct(msg, "data") or None, reason=msg.reason or None)


def answer_to(answer: Answer) -> pb.Answer:
    msg = pb.Answer(id=answer.id, ok=answer.ok, reason=answer.reason or "")
    if answer.data:
        msg.data.CopyFrom(to_struct(answer.data))
    return msg


# ---------------------------------------------------------------- results, handles, events


def result_to(result: TaskResult) -> pb.TaskResult:
    msg = pb.TaskResult(status=str(result.status), text=read_text(result.text, READ_TEXT_BYTES),
                        is_error=result.is_error, turns=read_count(result.turns, _INT32_MAX),
                        total_tokens=read_count(result.total_tokens), limit=result.limit or "",
                        usage_estimated=result.usage_estimated)
    if result.pending is not None:
        msg.pending.CopyFrom(request_to(result.pending))
    return msg


def inbox_item_to(item: InboxItem) -> pb.InboxItem:
    return pb.InboxItem(text=item.text, channel=item.channel, **{"from": item.from_})


def inbox_item_from(msg: pb.InboxItem) -> InboxItem:
    if not msg.text:
        raise InvalidArgument("item.text is required")
    return InboxItem(from_=getattr(msg, "from"), channel=msg.channel, text=msg.text)


def snapshot_to(h: Handle, changed: Sequence[DefinitionChange] = ()) -> pb.HandleSnapshot:
    usage = pb.Usage(prompt_tokens=read_count(h.usage.prompt_tokens),
                     completion_tokens=read_count(h.usage.completion_tokens),
                     total_tokens=read_count(h.usage.total_tokens))
    msg = pb.HandleSnapshot(id=h.id, agent=h.agent, state=str(h.state), parent=h.parent or "",
                            children=list(h.children), usage_total=read_count(h.usage.total_tokens),
                            turns_total=read_count(h.turns_total, _INT32_MAX),
                            inbox=[inbox_item_to(i) for i in h.inbox],
                            task_key=h.task_key, usage=usage, depth=h.depth,
                            usage_estimated=h.usage.estimated, version=h.version)
    if h.last_result is not None:
        msg.last_result.CopyFrom(result_to(h.last_result))
    if h.pending is not None:
        msg.pending.CopyFrom(request_to(h.pending))
    msg.definition_changed.extend(definition_change_to(c) for c in changed)
    return msg


def definition_change_to(c: DefinitionChange) -> pb.DefinitionChange:
    return pb.DefinitionChange(part=c.part, name=c.name, change=c.change, added=list(c.added),
                               removed=list(c.removed), retyped=list(c.retyped),
                               refuses_resume=c.refuses_resume, summary=c.summary)


def event_to(ev: Event) -> pb.Event:
    msg = pb.Event(seq=ev.seq, runtime_id=ev.runtime_id, handle=ev.handle, type=str(ev.type),
                   from_state=ev.from_state, to_state=ev.to_state, note=ev.note, at=ev.at)
    if ev.pending is not None:
        msg.pending.CopyFrom(request_to(ev.pending))
    if ev.result is not None:
        msg.result.CopyFrom(result_to(ev.result))
    if ev.data:
        msg.data.CopyFrom(to_struct(ev.data))
    return msg


def event_types(names: list[str]) -> frozenset[EventType]:
    """The Watch filter; an unknown name is INVALID_ARGUMENT listing the known ones."""
    known = {t.value: t for t in EventType}
    unknown = [n for n in names if n not in known]
    if unknown:
        listed = ", ".join(f'"{n}"' for n in unknown)
        raise InvalidArgument(f"unknown event type {listed} (known: {', '.join(known)})")
    return frozenset(known[n] for n in names)
