"""The guarded deserializers: undecodable or too-deep requests become ``Refused``, never an exception."""

from __future__ import annotations

import math
from collections.abc import Iterable

from google.protobuf import struct_pb2
from google.protobuf.message import Message
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.grpc_client import struct
from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_daemon.api.decode import Refused, _struct_children, _walk, guarded, struct_depth


def test_struct_depth_counts_every_struct_and_list_level() -> None:
    assert struct_depth(pb.SpawnRequest(runtime_id="r"), 10) == 0
    assert struct_depth(struct({"a": 1}), 10) == 1
    assert struct_depth(struct({"a": {"b": [1, [2]]}}), 10) == 4
    tool = pb.ToolDef(name="t", input_schema=struct({"p": {"q": {}}}))
    assert struct_depth(pb.NewRequest(agents=[pb.AgentDef(name="a", tools=[tool])]), 10) == 3


def test_struct_depth_stops_walking_once_past_the_limit() -> None:
    deep = struct_pb2.Struct()
    cur = deep
    for _ in range(30):
        cur = cur.fields["a"].struct_value
    assert struct_depth(deep, 3) == 4


def test_guarded_parses_good_bytes_and_refuses_bad_ones() -> None:
    parse = guarded(pb.ResumeRequest, 2)
    good = pb.ResumeRequest(runtime_id="r", answer=pb.Answer(id="a", data=struct({"k": {"v": 1}})))
    assert parse(good.SerializeToString()) == good
    deep = pb.ResumeRequest(runtime_id="r", answer=pb.Answer(id="a", data=struct({"k": {"v": [1]}})))
    refused = parse(deep.SerializeToString())
    assert isinstance(refused, Refused) and refused.message == deep and "--max-struct-depth" in refused.reason
    garbage = parse(b"\x0a\x02\xff\xfe")
    assert isinstance(garbage, Refused) and garbage.message is None
    assert garbage.reason == "the ResumeRequest could not be decoded: a string field is not valid UTF-8"


# ---- the recursive walk against the stack walk it replaced (same depth, same finiteness, same stop)

def _reference_walk(msg: Message, stop_above: int) -> tuple[int, bool]:
    """The walk as it was before the recursive ``_values`` (copied as it was): one stack for
    messages and one for Values, the depth checked at every Struct/ListValue."""
    deepest, finite = 0, True
    stack: list[tuple[Message, int]] = [(msg, 0)]
    values: list[tuple[struct_pb2.Value, int]] = []
    while stack:
        m, level = stack.pop()
        if isinstance(m, struct_pb2.Struct):
            level += 1
            values.extend([(v, level) for v in m.fields.values()])
        elif isinstance(m, struct_pb2.ListValue):
            level += 1
            values.extend([(v, level) for v in m.values])
        elif isinstance(m, struct_pb2.Value):
            values.append((m, level))
        else:
            stack.extend([(child, level) for child in _struct_children(m)])
        deepest = max(deepest, level)
        if deepest > stop_above:
            break
        if values:
            deepest, ok = _reference_walk_values(values, deepest, stop_above)
            finite = finite and ok
            if deepest > stop_above:
                break
    return deepest, finite


def _reference_walk_values(stack: list[tuple[struct_pb2.Value, int]], deepest: int, stop_above: int,
                 ) -> tuple[int, bool]:
    """Empty ``stack`` of (Value, the level it sits at); returns (deepest, all numbers finite)."""
    finite = True
    while stack:
        value, level = stack.pop()
        which = value.WhichOneof("kind")
        children: Iterable[struct_pb2.Value]
        if which == "struct_value":
            children = value.struct_value.fields.values()
        elif which == "list_value":
            children = value.list_value.values
        else:
            if which == "number_value" and not math.isfinite(value.number_value):
                finite = False
            continue
        level += 1
        if level > deepest:
            deepest = level
            if deepest > stop_above:
                stack.clear()
                break
        stack.extend([(child, level) for child in children])
    return deepest, finite


_leaves = st.one_of(st.none(), st.booleans(), st.text(max_size=3),
                    st.floats(allow_nan=True, allow_infinity=True), st.integers(-5, 5))
_trees = st.recursive(_leaves, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=2), inner, max_size=3)), max_leaves=25)


def _fill_value(target: struct_pb2.Value, item: object) -> None:
    if item is None:
        target.null_value = struct_pb2.NULL_VALUE
    elif isinstance(item, bool):
        target.bool_value = item
    elif isinstance(item, str):
        target.string_value = item
    elif isinstance(item, int | float):
        target.number_value = item
    elif isinstance(item, dict):
        target.struct_value.SetInParent()
        for key, child in item.items():
            _fill_value(target.struct_value.fields[key], child)
    else:
        assert isinstance(item, list)
        target.list_value.SetInParent()
        for child in item:
            _fill_value(target.list_value.values.add(), child)


@settings(max_examples=300, deadline=None)
@given(body=st.dictionaries(st.text(max_size=2), _trees, max_size=4), metadata=st.none() | st.dictionaries(
    st.text(max_size=2), _trees, max_size=3), bare=_trees, stop_above=st.integers(0, 7))
def test_the_walk_equals_the_stack_walk_it_replaced(body: dict[str, object],
                                                    metadata: dict[str, object] | None, bare: object,
                                                    stop_above: int) -> None:
    reply = pb.WorkerMessage()
    for key, item in body.items():
        _fill_value(reply.llm_reply.body.fields[key], item)
    outcome = pb.WorkerMessage()
    if metadata is not None:
        outcome.tool_outcome.metadata.SetInParent()
        for key, item in metadata.items():
            _fill_value(outcome.tool_outcome.metadata.fields[key], item)
    value = struct_pb2.Value()
    _fill_value(value, bare)
    listed = struct_pb2.ListValue()
    _fill_value(listed.values.add(), bare)
    for msg in (reply, outcome, reply.llm_reply.body, value, listed):
        depth, finite = _walk(msg, stop_above)
        expected_depth, expected_finite = _reference_walk(msg, stop_above)
        assert depth == expected_depth
        if depth <= stop_above:  # past the limit the walk stops, wherever its order has got to
            assert finite == expected_finite
