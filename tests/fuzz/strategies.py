"""Hypothesis strategies for AgentRuntime requests: random messages built from the descriptors.

Field values lean towards ids the daemon knows (the playground runtime, its
handles, the sentinel runtime it must protect) so random requests reach the
engine instead of stopping at NOT_FOUND, and towards the edges: empty
strings, negative and huge integers, Structs of every shape. ``sanitize``
then keeps a request from leaving the machine or stopping the daemon: URLs
point at a closed loopback port and a daemon-wide Shutdown is turned off.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import struct_pb2
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from hypothesis import strategies as st

from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_daemon.model import EventType

PLAYGROUND = "fuzz-playground"
SENTINEL = "fuzz-sentinel-7c1e55"
NOWHERE = "http://127.0.0.1:9"  # the discard port: nothing listens, so every call fails fast and stays local

_INT_RANGES = {
    FieldDescriptor.TYPE_INT32: (-(2**31), 2**31 - 1), FieldDescriptor.TYPE_INT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_UINT64: (0, 2**64 - 1), FieldDescriptor.TYPE_UINT32: (0, 2**32 - 1),
}
_KNOWN: dict[str, st.SearchStrategy[str]] = {
    "runtime_id": st.sampled_from([PLAYGROUND, PLAYGROUND, SENTINEL, "", "rt-nope", "bad id/!"]),
    "handle": st.sampled_from(["root", "root/a.1", "root/a.2", "root/b.1/a.1", "", "root/ghost.9", "root\x00",
                               "h" * 300]),
    "parent": st.sampled_from(["root", "root/a.1", "", "nope", "\x00", "p" * 300]),
    "agent": st.sampled_from(["a", "b", "", "ghost"]),
    "style": st.sampled_from(["openai", "anthropic", "worker", "", "smoke-signals"]),
    "source": st.sampled_from(["native", "webhook", "http", "", "carrier-pigeon"]),
    "types": st.sampled_from([t.value for t in EventType] + ["", "telegram"]),
    "id": st.sampled_from(["approval-x", "", "r1", "r\x001", "i" * 300]),
}

json_leaves = (st.none() | st.booleans() | st.integers(-(2**60), 2**60)
               | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=20))
json_values = st.recursive(json_leaves, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=20)


@st.composite
def structs(draw: st.DrawFn) -> struct_pb2.Struct:
    out = struct_pb2.Struct()
    for key, value in draw(st.dictionaries(st.text(max_size=8), json_values, max_size=5)).items():
        _set_value(out.fields[key], value)
    return out


def _set_value(target: struct_pb2.Value, value: Any) -> None:
    """Like Struct.update, but NaN and infinities are kept (a client in another language can send them)."""
    if value is None:
        target.null_value = struct_pb2.NULL_VALUE
    elif isinstance(value, bool):
        target.bool_value = value
    elif isinstance(value, int | float):
        target.number_value = float(value)
    elif isinstance(value, str):
        target.string_value = value
    elif isinstance(value, list):
        target.list_value.SetInParent()
        for item in value:
            _set_value(target.list_value.values.add(), item)
    else:
        target.struct_value.SetInParent()
        for key, item in value.items():
            _set_value(target.struct_value.fields[key], item)


def messages(cls: type[Message], depth: int = 0) -> st.SearchStrategy[Message]:
    """A random ``cls``, each field set or left unset."""
    return st.composite(lambda draw: _build(draw, cls.DESCRIPTOR, cls, depth))()


def _build(draw: st.DrawFn, desc: Descriptor, cls: type[Message], depth: int) -> Message:
    msg = cls()
    for fd in desc.fields:
        if not draw(st.booleans()):
            continue
        if fd.is_repeated:
            _fill_repeated(draw, msg, fd, depth)
        elif fd.type == FieldDescriptor.TYPE_MESSAGE:
            getattr(msg, fd.name).CopyFrom(_message_value(draw, fd, depth))
        else:
            setattr(msg, fd.name, draw(_scalar(fd)))
    return msg


def _fill_repeated(draw: st.DrawFn, msg: Message, fd: FieldDescriptor, depth: int) -> None:
    sub = fd.message_type
    if sub is not None and sub.GetOptions().map_entry:
        getattr(msg, fd.name).update(draw(st.dictionaries(st.text(max_size=10), st.text(max_size=20),
                                                          max_size=3)))
        return
    for _ in range(draw(st.integers(0, 3))):
        if fd.type == FieldDescriptor.TYPE_MESSAGE:
            getattr(msg, fd.name).add().CopyFrom(_message_value(draw, fd, depth))
        else:
            getattr(msg, fd.name).append(draw(_scalar(fd)))


def _message_value(draw: st.DrawFn, fd: FieldDescriptor, depth: int) -> Message:
    sub = fd.message_type
    assert sub is not None
    if sub.full_name == "google.protobuf.Struct":
        return draw(structs())
    if depth >= 3:
        return getattr(pb, sub.name)()
    return _build(draw, sub, getattr(pb, sub.name), depth + 1)


def _scalar(fd: FieldDescriptor) -> st.SearchStrategy[Any]:
    if fd.type == FieldDescriptor.TYPE_STRING:
        known = _KNOWN.get(fd.name)
        return st.one_of(known, st.text(max_size=30)) if known is not None else st.text(max_size=30)
    if fd.type == FieldDescriptor.TYPE_BOOL:
        return st.booleans()
    lo, hi = _INT_RANGES[fd.type]
    return st.one_of(st.integers(-3, 3).filter(lambda v: lo <= v <= hi), st.integers(lo, hi))


def sanitize(method: str, msg: Message) -> Message:
    """Keep a random request local and bounded: loopback URLs, short waits, no daemon-wide stop."""
    if isinstance(msg, pb.NewRequest):
        msg.llm.base_url = NOWHERE + "/v1"
        for agent in msg.agents:
            for tool in agent.tools:
                if tool.HasField("http"):
                    tool.http.url = NOWHERE + "/tool/{x}"
    elif isinstance(msg, pb.ShutdownRequest):
        msg.daemon = False
    elif isinstance(msg, pb.WaitRequest):
        msg.timeout_ms = min(abs(msg.timeout_ms), 300) or 100
    return msg
