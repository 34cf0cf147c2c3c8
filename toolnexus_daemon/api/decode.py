"""Request decoding that cannot fail the RPC badly, and the Struct nesting limit.

gRPC decodes a request before any servicer code runs; a request protobuf
cannot parse (corrupt bytes, invalid UTF-8 in a string, nesting past the
parser's 100 levels) would end as UNKNOWN with a traceback in the log. The
deserializers built here never raise: such a request becomes a ``Refused``
value that the servicer turns into INVALID_ARGUMENT, and so does a request
whose Structs nest deeper than ``--max-struct-depth`` or hold NaN/Infinity,
which no JSON can carry (checked once, here, for every RPC, so no later code
walks an unbounded tree or fails converting one).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from math import isfinite
from typing import TypeAlias

import grpc
from google.protobuf import struct_pb2
from google.protobuf.descriptor import Descriptor, FieldDescriptor, MethodDescriptor
from google.protobuf.message import DecodeError, Message
from grpc import aio

from ._gen import runtime_pb2 as pb
from ._gen import runtime_pb2_grpc as pb_grpc

STRUCT, LIST, VALUE = "google.protobuf.Struct", "google.protobuf.ListValue", "google.protobuf.Value"
_DECODE_REASONS = {
    "MaxDepth": "it nests deeper than protobuf's parser allows (100 message levels, about 32 Struct levels)",
    "UTF-8": "a string field is not valid UTF-8",
    "corrupt": "its protobuf wire format is malformed",
}


@dataclass(frozen=True)
class Refused:
    """A request the daemon will not act on; ``message`` is the decoded request when there is one."""

    reason: str
    message: Message | None = None


Deserializer = Callable[[bytes], "Message | Refused"]
# what the servicer's methods are registered as: guarded requests in, messages (or Watch's bytes) out
# (a string: grpc's RpcMethodHandler is generic only in its type stubs)
Handler: TypeAlias = "grpc.RpcMethodHandler[Message | Refused, Message | bytes]"


def guarded(cls: type[Message], max_depth: int) -> Deserializer:
    """A deserializer for ``cls`` that returns ``Refused`` instead of raising or passing a too-deep Struct."""
    name = cls.DESCRIPTOR.name
    walk = _reaches_struct(cls.DESCRIPTOR)

    def parse(data: bytes) -> Message | Refused:
        try:
            msg = cls.FromString(data)
        except DecodeError as exc:
            return Refused(f"the {name} could not be decoded: {_decode_reason(exc)}")
        problem = struct_problem(msg, max_depth) if walk else None
        return Refused(f"a Struct in the {name} {problem}", msg) if problem else msg

    return parse


def _decode_reason(exc: DecodeError) -> str:
    text = str(exc)
    return next((reason for marker, reason in _DECODE_REASONS.items() if marker in text),
                "it is not a valid protobuf message")


def struct_problem(msg: Message, max_depth: int) -> str | None:
    """What is wrong with the Structs of ``msg`` (too deep, or NaN/Infinity), or None."""
    deepest, finite = _walk(msg, max_depth)
    if deepest > max_depth:
        return f"nests more than {max_depth} levels deep; the limit is {max_depth} (--max-struct-depth)"
    if not finite:
        return "holds NaN or Infinity, which JSON cannot carry"
    return None


def struct_depth(msg: Message, stop_above: int) -> int:
    """The deepest Struct/ListValue nesting anywhere in ``msg`` (each level counts 1), or a value
    above ``stop_above`` as soon as one is found: a hostile request is not walked to its end."""
    return _walk(msg, stop_above)[0]


def _walk(msg: Message, stop_above: int) -> tuple[int, bool]:
    """(deepest nesting, whether every number is finite); stops once deeper than ``stop_above``
    (the depth returned is then ``stop_above + 1``; the finiteness is of what was seen).

    Messages are walked through the fields that can reach a Struct (``_struct_children``); the
    Struct trees themselves by ``_values``, which looks at nothing but each Value's kind: this
    runs on every request and every worker reply, so it avoids per-node descriptor work. A Struct
    tree sits in messages only, so each starts at level 1 (a bare Value at level 0).
    """
    deepest, bad = 0, _Bad()
    stack: list[Message] = [msg]
    try:
        while stack:
            m = stack.pop()
            if isinstance(m, struct_pb2.Struct | struct_pb2.ListValue):
                if stop_above < 1:
                    raise _TooDeep
                values = m.fields.values() if isinstance(m, struct_pb2.Struct) else m.values
                found = _values(values, 1, stop_above, bad)
            elif isinstance(m, struct_pb2.Value):
                found = _values((m,), 0, stop_above, bad)
            else:
                stack.extend(_struct_children(m))
                continue
            if found > deepest:
                deepest = found
    except _TooDeep:
        return stop_above + 1, not bad.seen
    return deepest, not bad.seen


class _TooDeep(Exception):
    """A Struct or ListValue nests past the walk's limit: the walk stops there."""


class _Bad:
    """Whether the walk met a number JSON cannot carry (NaN, Infinity)."""

    seen = False


def _values(values: Iterable[struct_pb2.Value], level: int, stop_above: int, bad: _Bad) -> int:
    """The deepest level reached from ``values``, the members of a Struct or ListValue at ``level``
    (0 for a bare Value): each Struct or ListValue among them sits one level deeper. Raises
    ``_TooDeep`` before entering one past ``stop_above``; recursion is bounded by that limit."""
    deepest = level
    for value in values:
        which = value.WhichOneof("kind")
        children: Iterable[struct_pb2.Value]
        if which == "struct_value":
            children = value.struct_value.fields.values()
        elif which == "list_value":
            children = value.list_value.values
        else:
            if which == "number_value" and not isfinite(value.number_value):
                bad.seen = True
            continue
        if level >= stop_above:
            raise _TooDeep
        found = _values(children, level + 1, stop_above, bad)
        if found > deepest:
            deepest = found
    return deepest


def _struct_children(m: Message) -> list[Message]:
    out: list[Message] = []
    for name, shape in _struct_fields(m.DESCRIPTOR):
        if shape is _SINGLE:
            if m.HasField(name):
                out.append(getattr(m, name))
        elif shape is _MAP:
            out.extend(getattr(m, name).values())
        else:
            out.extend(getattr(m, name))
    return out


_SINGLE, _MAP, _REPEATED = "single", "map", "repeated"


@functools.cache
def _struct_fields(desc: Descriptor) -> tuple[tuple[str, str], ...]:
    """The message fields of ``desc`` that can hold a Struct, each with its shape."""
    out = []
    for fd in desc.fields:
        sub = fd.message_type
        if fd.type != FieldDescriptor.TYPE_MESSAGE or sub is None or not _reaches_struct(sub):
            continue
        shape = _MAP if sub.GetOptions().map_entry else _REPEATED if fd.is_repeated else _SINGLE
        out.append((fd.name, shape))
    return tuple(out)


@functools.cache
def _reaches_struct(desc: Descriptor) -> bool:
    """Whether a message of this type can hold a Struct (so the walk skips those that cannot)."""
    return _reaches(desc, frozenset())


def _reaches(desc: Descriptor, seen: frozenset[str]) -> bool:
    if desc.full_name in (STRUCT, LIST, VALUE):
        return True
    if desc.full_name in seen:
        return False
    seen = seen | {desc.full_name}
    return any(fd.message_type is not None and _reaches(fd.message_type, seen) for fd in desc.fields)


def add_servicer(server: aio.Server, servicer: pb_grpc.AgentRuntimeServicer, max_depth: int) -> None:
    """Register the AgentRuntime methods of ``servicer`` with guarded deserializers.

    The same registration the generated ``add_AgentRuntimeServicer_to_server``
    makes, built from the service descriptor so no method can be forgotten.
    """
    service = pb.DESCRIPTOR.services_by_name["AgentRuntime"]
    handlers = {method.name: _handler(method, getattr(servicer, method.name),
                                      guarded(getattr(pb, method.input_type.name), max_depth))
                for method in service.methods}
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service.full_name, handlers),))
    server.add_registered_method_handlers(service.full_name, handlers)


def _serialize(message: Message | bytes) -> bytes:
    """A reply's bytes; one a servicer encoded itself passes through as it is (Watch encodes each
    event before yielding it, so it holds no decoded copy while gRPC sends)."""
    return message if isinstance(message, bytes) else message.SerializeToString()


def _handler(method: MethodDescriptor, behavior: Callable[[object, object], object], parse: Deserializer,
             ) -> Handler:
    """The handler of ``method``'s shape (unary or streaming each way) calling ``behavior``."""
    streams = (method.client_streaming, method.server_streaming)
    if streams == (False, False):
        make = grpc.unary_unary_rpc_method_handler
    elif streams == (False, True):
        make = grpc.unary_stream_rpc_method_handler
    elif streams == (True, False):
        make = grpc.stream_unary_rpc_method_handler
    else:
        make = grpc.stream_stream_rpc_method_handler
    return make(behavior, request_deserializer=parse, response_serializer=_serialize)
