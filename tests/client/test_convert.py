"""Conversions between protobuf messages and the client's values (``_convert``)."""

from __future__ import annotations

import collections
import enum
import json
import math
import types
from typing import Any

import pytest
from google.protobuf import json_format, struct_pb2

from toolnexus_client import Answer, Budget, Llm, Request, Tool, ToolResult, agent, registry
from toolnexus_client import _convert as convert
from toolnexus_client._gen import runtime_pb2 as pb


def test_struct_round_trip_keeps_integers_integers() -> None:
    """Struct stores doubles; reading one back gives ints for integral numbers, floats otherwise."""
    value = {"n": 5, "f": 0.5, "nested": {"max_tokens": 4096, "list": [1, 2.5, "x", None, True]}}
    back = convert.dict_from(convert.struct_from(value))
    assert back == value
    assert isinstance(back["n"], int) and isinstance(back["nested"]["list"][0], int)


def test_request_round_trip_with_and_without_optionals() -> None:
    """A Request survives protobuf, and empty optional fields come back as None."""
    full = Request("r1", "authorization", "approve?", url="https://x/auth", data={"path": ["root"]},
                   expires_at="2030-01-01T00:00:00Z")
    assert convert.request_from_pb(convert.request_to_pb(full)) == full
    bare = Request("r2", "input", "name?")
    assert convert.request_from_pb(convert.request_to_pb(bare)) == bare


def test_answer_round_trip_and_dict_form() -> None:
    """An Answer built from a dict matches the dataclass and survives protobuf."""
    answer = Answer.of({"id": "r1", "ok": False, "reason": "not authorized"})
    assert answer == Answer("r1", False, reason="not authorized")
    assert convert.answer_from_pb(convert.answer_to_pb(answer)) == answer
    with pytest.raises(ValueError, match="'id' and 'ok'"):
        Answer.of({"ok": True})


def test_task_result_and_snapshot_from_pb() -> None:
    """TaskResult, HandleSnapshot and their optional sub-messages convert field by field."""
    pending = pb.Request(id="r1", kind="authorization", prompt="approve?")
    result = pb.TaskResult(status="pending", pending=pending, turns=1, total_tokens=5)
    snap = pb.HandleSnapshot(id="root/a.1", agent="a", state="suspended", parent="root", children=["x"],
                             last_result=result, usage_total=5, turns_total=1, pending=pending,
                             inbox=[pb.InboxItem(**{"from": "root", "channel": "c", "text": "hi"})],
                             usage=pb.Usage(prompt_tokens=3, completion_tokens=2, total_tokens=5), depth=1)
    got = convert.snapshot_from_pb(snap)
    assert got.last_result is not None
    assert got.last_result.pending == Request("r1", "authorization", "approve?")
    assert (got.state, got.children, got.usage_total, got.turns_total) == ("suspended", ("x",), 5, 1)
    assert got.inbox[0].sender == "root" and got.usage.prompt_tokens == 3 and got.depth == 1
    empty = convert.snapshot_from_pb(pb.HandleSnapshot(id="root/a.1", agent="a", state="idle"))
    assert empty.last_result is None and empty.pending is None


def test_event_from_pb_carries_data_and_result() -> None:
    """An Event keeps its seq, states, note, data and result."""
    event = pb.Event(seq=7, runtime_id="rt", handle="root/a.1", type="transition", from_state="running",
                     to_state="idle", note="x", result=pb.TaskResult(status="done", text="ok"), at="now")
    event.data.update({"tool": "t", "n": 2})
    got = convert.event_from_pb(event)
    assert (got.seq, got.from_state, got.to_state, got.note) == (7, "running", "idle", "x")
    assert got.result is not None and got.result.text == "ok" and got.data == {"tool": "t", "n": 2}
    assert got.pending is None


def test_outcome_to_pb_carries_pending_and_metadata() -> None:
    """A suspending ToolResult becomes a ToolOutcome with its Request set."""
    outcome = convert.outcome_to_pb("c1", ToolResult.suspend(id="r1", kind="approval", prompt="ok?"))
    assert outcome.HasField("pending") and outcome.pending.kind == "approval" and not outcome.is_error
    plain = convert.outcome_to_pb("c2", ToolResult.error("boom", metadata={"code": 3}))
    assert not plain.HasField("pending") and plain.is_error and dict(plain.metadata) == {"code": 3}


def test_context_from_call_exposes_the_answer() -> None:
    """A ToolCall's arguments and answer reach the tool as a dict and a Context."""
    call = pb.ToolCall(call_id="c1", handle="root/a.1", tool="t",
                       answer=pb.Answer(id="r1", ok=True))
    call.arguments.update({"n": 1})
    args, ctx = convert.context_from_call("rt", call)
    assert args == {"n": 1}
    assert (ctx.call_id, ctx.handle, ctx.runtime_id, ctx.tool) == ("c1", "root/a.1", "rt", "t")
    assert ctx.answer == Answer("r1", True)
    _, bare = convert.context_from_call("rt", pb.ToolCall(call_id="c2", tool="t"))
    assert bare.answer is None


def test_new_request_from_a_registry() -> None:
    """Agents, tool sources, http configs, budgets and the llm config all reach the NewRequest."""
    tools = [Tool("native_one", "d", {"type": "object", "properties": {"q": {"type": "string"}}},
                  execute=lambda a, c: "x"),
             Tool.webhook("hook", "http://127.0.0.1:1/h", headers={"X": "${K}"}),
             Tool.http("rest", "http://127.0.0.1:1/items/{id}", method="get", query=["q"])]
    reg = registry(agent("a", does="acts", uses={"tools": tools, "team": ["b"]}, budget={"max_turns": 3}),
                   agent("b", model="m2", soul="s", wait_for=True))
    llm = Llm(style="openai", base_url="http://127.0.0.1:1/v1", model="m", request_params={"seed": 1})
    req = convert.new_request(reg, llm, {"inbox_cap": 4}, "rt-9", "key")
    assert [a.name for a in req.agents] == ["a", "b"]
    assert (req.runtime_id, req.runtime_key) == ("rt-9", "key")
    a, b = req.agents
    assert [(t.name, t.source) for t in a.tools] == [("native_one", "native"), ("hook", "webhook"),
                                                      ("rest", "http")]
    assert a.tools[2].http.method == "GET" and list(a.tools[2].http.query) == ["q"]
    assert dict(a.tools[1].http.headers) == {"X": "${K}"} and a.tools[1].http.method == "POST"
    assert convert.dict_from(a.tools[0].input_schema)["properties"] == {"q": {"type": "string"}}
    assert convert.dict_from(a.tools[1].input_schema) == {"type": "object", "properties": {}}
    assert list(a.team) == ["b"] and a.budget.max_turns == 3 and a.model == "inherit"
    assert (b.model, b.soul, b.wait_for, b.HasField("budget")) == ("m2", "s", True, False)
    assert req.llm.style == "openai" and convert.dict_from(req.llm.request_params) == {"seed": 1}
    assert req.options.inbox_cap == 4


def test_unknown_option_and_budget_keys_are_named() -> None:
    """A typo in options or a budget dict fails before any RPC, naming the key."""
    with pytest.raises(ValueError, match="inbox_capp"):
        convert.options_to_pb({"inbox_capp": 3})
    with pytest.raises(ValueError, match="max_turn\\b"):
        Budget.of({"max_turn": 3})


# ------------------------------------------------------------ Struct <-> dict, held to protobuf's own path

def _reference_struct_from(value: Any) -> struct_pb2.Struct:
    """What ``struct_from`` must build: protobuf's ``Struct.update``."""
    out = struct_pb2.Struct()
    if value:
        out.update(dict(value))
    return out


def _reference_ints(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _reference_ints(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_reference_ints(v) for v in value]
    return value


def _reference_dict_from(value: struct_pb2.Struct) -> Any:
    """What ``dict_from`` must give: ``json_format.MessageToDict``, integral floats made ints."""
    return _reference_ints(json_format.MessageToDict(value))


class _Colour(enum.IntEnum):
    RED = 1


TRICKY: list[Any] = [
    {},
    {"": ""},
    {"empty_obj": {}, "empty_list": [], "nested_empty": [[], [{}], {"a": []}]},
    {"n": 5, "neg": -3, "zero": 0, "negzero": -0.0, "half": 0.5, "big": 10**20, "huge": 1e300,
     "tiny": 5e-324, "odd": 2**53 + 1, "max": 2**63, "minus": -(2**70)},
    {"t": True, "f": False, "none": None, "list": [True, 1, 1.0, None, "1", 0, False]},
    {"ünïcödé ✓": "välue \u0000 \n", "emoji": "😀", "key with spaces": {"x": [["deep", [["deeper"]]]]}},
    {"tuple": (1, "a", None), "nested_tuple": [(), ({"a": (2,)},)]},
    {"ordered": collections.OrderedDict([("b", 1), ("a", {"c": 2})]), "enum": _Colour.RED},
    {"str_sub": type("S", (str,), {})("sub"), "float_sub": type("F", (float,), {})(1.5)},
    {"chat": {"model": "m", "messages": [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "t", "arguments": "{}"}}]}],
        "tools": [{"type": "function", "function": {"parameters": {"type": "object", "properties": {}}}}],
        "max_tokens": 1024, "temperature": 0.7}},
]


@pytest.mark.parametrize("value", TRICKY, ids=range(len(TRICKY)))
def test_struct_from_builds_what_struct_update_builds(value: Any) -> None:
    """The direct path sets the same fields as protobuf's ``Struct.update``, byte for byte."""
    got, want = convert.struct_from(value), _reference_struct_from(value)
    assert got == want
    assert got.SerializeToString(deterministic=True) == want.SerializeToString(deterministic=True)


@pytest.mark.parametrize("value", TRICKY, ids=range(len(TRICKY)))
def test_dict_from_reads_what_message_to_dict_reads(value: Any) -> None:
    """The direct reader gives what ``MessageToDict`` gives (integral numbers as ints), types included."""
    message = _reference_struct_from(value)
    got, want = convert.dict_from(message), _reference_dict_from(message)
    assert got == want
    assert json.dumps(got) == json.dumps(want)  # ints stay ints, floats floats, the keys in order


def test_struct_from_mapping_and_empty_inputs() -> None:
    """A non-dict Mapping, None and an empty mapping: what ``Struct.update`` gives."""
    proxy = types.MappingProxyType({"a": [1, {"b": None}]})
    assert convert.struct_from(proxy) == _reference_struct_from(proxy)
    assert convert.struct_from(None) == struct_pb2.Struct() == convert.struct_from({})


@pytest.mark.parametrize("bad", [{"set": {1, 2}}, {"obj": object()}, {"deep": [{"x": b"bytes"}]},
                                 {"nan_ok_but_key": {1: "int key"}}])
def test_struct_from_refuses_what_struct_update_refuses(bad: Any) -> None:
    """A value JSON cannot hold fails with protobuf's own error, type and message."""
    with pytest.raises(Exception) as want:
        _reference_struct_from(bad)
    with pytest.raises(type(want.value)) as got:
        convert.struct_from(bad)
    assert str(got.value) == str(want.value)


def test_dict_from_unset_values_and_non_finite_numbers() -> None:
    """An unset Value reads as None; Infinity and NaN fail as ``MessageToDict`` fails."""
    message = struct_pb2.Struct()
    message.fields["unset"]  # noqa: B018 (an unset Value in the map)
    message.fields["list"].list_value.values.add()
    assert convert.dict_from(message) == _reference_dict_from(message) == {"unset": None, "list": [None]}
    for number in (math.inf, -math.inf, math.nan):
        bad = struct_pb2.Struct()
        bad.fields["x"].list_value.values.add().number_value = number
        with pytest.raises(ValueError) as want:
            _reference_dict_from(bad)
        with pytest.raises(ValueError) as got:
            convert.dict_from(bad)
        assert str(got.value) == str(want.value)
