"""A forwarded call decodes the owner's reply as the class its caller names, checked against the contract.

``Forwarder`` is generic over the reply class (so mypy types what a forwarded call returns); the
class travels as an argument beside the method's name, so the pairing is checked where the call is
built: a class the method does not answer is the caller's mistake and fails at once, naming both.
"""

from __future__ import annotations

import pytest

from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_daemon.api.forward import _wire


def test_the_wire_decodes_the_methods_own_reply_class() -> None:
    path, encode, decode = _wire("Spawn", pb.SpawnResponse)
    assert path == "/toolnexus.agents.v1.AgentRuntime/Spawn"
    assert encode(pb.SpawnRequest(runtime_id="r")) == pb.SpawnRequest(runtime_id="r").SerializeToString()
    reply = decode(pb.SpawnResponse(handle="h1").SerializeToString())
    assert isinstance(reply, pb.SpawnResponse) and reply.handle == "h1"


def test_a_reply_class_the_method_does_not_answer_is_refused_naming_both() -> None:
    with pytest.raises(TypeError, match=r"Spawn answers toolnexus\.agents\.v1\.SpawnResponse, not "
                                        r"toolnexus\.agents\.v1\.WakeResponse"):
        _wire("Spawn", pb.WakeResponse)
