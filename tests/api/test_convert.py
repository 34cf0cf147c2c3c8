"""Protobuf <-> domain conversion, without a daemon: the edge cases a wire format hides."""

from __future__ import annotations

import pytest

from tests.support.grpc_client import struct
from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_daemon.api.convert import event_types, from_struct, to_struct
from toolnexus_daemon.api.convert_registry import registry_from, spawn_budget
from toolnexus_daemon.errors import InvalidArgument
from toolnexus_daemon.model import LlmStyle, OnCrash, ToolSource


def test_struct_numbers_come_back_as_ints_when_integral() -> None:
    value = from_struct(struct({"n": 3, "x": 0.25, "nested": [{"k": 2.0}], "flag": True, "none": None}))
    assert value == {"n": 3, "x": 0.25, "nested": [{"k": 2}], "flag": True, "none": None}
    assert isinstance(value["n"], int)


def test_to_struct_stringifies_what_json_cannot_hold() -> None:
    assert from_struct(to_struct({"t": (1, 2)})) == {"t": [1, 2]}
    assert from_struct(to_struct({"o": object()}))["o"].startswith("<object")


def test_zero_fields_take_the_documented_defaults() -> None:
    req = pb.NewRequest(agents=[pb.AgentDef(name="a", tools=[pb.ToolDef(name="t")])],
                        llm=pb.LlmConfig(base_url="http://127.0.0.1:1/v1", model="m"))
    reg = registry_from(req)
    assert reg.llm.style is LlmStyle.OPENAI
    assert (reg.llm.retries, reg.llm.timeout_ms) == (3, 60_000)
    assert reg.agents[0].model == "inherit"
    assert reg.agents[0].tools[0].source is ToolSource.NATIVE
    assert (reg.options.max_turns, reg.options.inbox_cap, reg.options.tool_timeout_ms) == (6, 8, 30_000)


def test_retries_minus_one_is_kept_and_below_is_refused() -> None:
    base = {"agents": [pb.AgentDef(name="a")]}
    llm = pb.LlmConfig(base_url="http://127.0.0.1:1/v1", model="m", retries=-1)
    assert registry_from(pb.NewRequest(llm=llm, **base)).llm.retries == -1
    llm.retries = -2
    with pytest.raises(InvalidArgument, match="llm.retries"):
        registry_from(pb.NewRequest(llm=llm, **base))


def test_conversion_problems_are_reported_with_the_engine_s() -> None:
    req = pb.NewRequest(agents=[pb.AgentDef(name="a", tools=[pb.ToolDef(name="t", source="x")], team=["zz"])],
                        llm=pb.LlmConfig(style="nope"))
    with pytest.raises(InvalidArgument) as err:
        registry_from(req)
    text = str(err.value)
    assert 'unknown source "x"' in text and 'unknown llm.style "nope"' in text
    assert 'unknown agent "zz"' in text
    assert text.startswith("invalid registry: 1) ")


def test_a_negative_spawn_budget_is_refused() -> None:
    assert spawn_budget(pb.SpawnRequest(agent="a")) is None
    with pytest.raises(InvalidArgument, match="budget.max_turns"):
        spawn_budget(pb.SpawnRequest(agent="a", budget=pb.Budget(max_turns=-1)))


def test_event_type_filter() -> None:
    assert event_types([]) == frozenset()
    assert {str(t) for t in event_types(["result", "pending"])} == {"result", "pending"}
    with pytest.raises(InvalidArgument, match='"nope"'):
        event_types(["nope"])


def test_on_crash_is_rerun_ask_or_refused_naming_the_tool() -> None:
    """docs/protocol.md §11: ``ToolDef.on_crash`` defaults to rerun; an unknown value is refused."""
    def new(on_crash: str) -> pb.NewRequest:
        tool = pb.ToolDef(name="charge", on_crash=on_crash)
        return pb.NewRequest(agents=[pb.AgentDef(name="a", tools=[tool])],
                             llm=pb.LlmConfig(base_url="http://127.0.0.1:1/v1", model="m"))

    assert registry_from(new("")).agents[0].tools[0].on_crash is OnCrash.RERUN
    assert registry_from(new("ask")).agents[0].tools[0].on_crash is OnCrash.ASK
    with pytest.raises(InvalidArgument, match='agent "a": tool "charge" has unknown on_crash "later"'):
        registry_from(new("later"))
