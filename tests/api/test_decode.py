"""The guarded deserializers: undecodable or too-deep requests become ``Refused``, never an exception."""

from __future__ import annotations

from google.protobuf import struct_pb2

from tests.support.grpc_client import struct
from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_daemon.api.decode import Refused, guarded, struct_depth


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
