"""Random and malformed requests to every RPC of a live daemon: it never crashes or hangs, every
answer is a proper status (never UNKNOWN or INTERNAL), and the state it held is intact afterwards."""

from __future__ import annotations

import grpc
import pytest
from google.protobuf.message import Message
from grpc_health.v1 import health_pb2, health_pb2_grpc
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.conftest import CASES, KEY, Sentinel, examples, stored_events
from tests.fuzz.strategies import PLAYGROUND, SENTINEL, messages, sanitize, structs
from tests.support.daemon import DaemonProcess
from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_daemon.api._gen import runtime_pb2_grpc as pb_grpc

SERVICE = pb.DESCRIPTOR.services_by_name["AgentRuntime"]
UNARY = [m for m in SERVICE.methods if not m.client_streaming and not m.server_streaming]
PROPER = {grpc.StatusCode.OK, grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND,
          grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.PERMISSION_DENIED,
          grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.OUT_OF_RANGE, grpc.StatusCode.ALREADY_EXISTS}
# server streams: a valid one follows the live tail until its deadline, its proper end here
STREAMS = ("Watch", "WatchPending")
WATCH_PROPER = PROPER | {grpc.StatusCode.DEADLINE_EXCEEDED}
CALL_TIMEOUT = 5.0
WATCH_TIMEOUT = 0.1


def _path(method: str) -> str:
    return f"/{SERVICE.full_name}/{method}"


def _status(call: object) -> tuple[grpc.StatusCode, str]:
    try:
        call()  # type: ignore[operator]
    except grpc.RpcError as err:
        return err.code(), err.details() or ""
    return grpc.StatusCode.OK, ""


def _drain(stream: object) -> None:
    for _ in stream:  # type: ignore[attr-defined]
        pass


def _raw_struct(depth: int) -> bytes:
    """A Struct nested ``depth`` levels, encoded by hand (deeper than protobuf lets Python build)."""
    inner = b""
    for _ in range(depth):
        value = b"\x2a" + _ld(inner)  # Value.struct_value
        inner = b"\x0a" + _ld(b"\x0a\x01a\x12" + _ld(value))  # Struct.fields entry {"a": value}
    return inner


def _ld(payload: bytes) -> bytes:
    """``payload`` with its varint length in front."""
    n, head = len(payload), b""
    while n >= 0x80:
        head, n = head + bytes([n & 0x7F | 0x80]), n >> 7
    return head + bytes([n]) + payload


@pytest.mark.parametrize("method", UNARY, ids=lambda m: m.name)
def test_random_requests_to_every_unary_rpc(method: object, stub: pb_grpc.AgentRuntimeStub,
                                            sentinel: Sentinel) -> None:
    name, cls = method.name, getattr(pb, method.input_type.name)  # type: ignore[attr-defined]

    @examples(30)
    @given(msg=messages(cls))
    def run(msg: Message) -> None:
        CASES[name] += 1
        request = sanitize(name, msg)
        code, details = _status(lambda: getattr(stub, name)(request, timeout=CALL_TIMEOUT))
        assert code in PROPER, (code, details, request)

    run()


@examples(30)
@given(msg=messages(pb.WatchRequest))
def test_random_watch_requests(stub: pb_grpc.AgentRuntimeStub, sentinel: Sentinel,
                               msg: pb.WatchRequest) -> None:
    CASES["Watch"] += 1
    code, details = _status(lambda: _drain(stub.Watch(msg, timeout=WATCH_TIMEOUT)))
    assert code in WATCH_PROPER, (code, details, msg)


def _mutations(valid: bytes) -> st.SearchStrategy[bytes]:
    return st.one_of(
        st.binary(max_size=200),
        st.integers(0, max(0, len(valid) - 1)).map(lambda i: valid[:i]),  # truncated
        st.builds(lambda i, b: valid[:i] + bytes([b]) + valid[i + 1:], st.integers(0, len(valid)),
                  st.integers(0, 255)),  # one byte changed
        st.just(b"\x0a\x03\xff\xfe\xfd" + valid),  # field 1 (a string everywhere here) with invalid UTF-8
        st.integers(20, 60).map(lambda d: b"\x12" + _ld(b"\x0a\x01r\x1a" + _ld(_raw_struct(d)))),
    )


@pytest.mark.parametrize("method", list(SERVICE.methods), ids=lambda m: m.name)
def test_malformed_bytes_to_every_rpc(method: object, channel: grpc.Channel, sentinel: Sentinel) -> None:
    """Garbage, truncations, flipped bytes, invalid UTF-8 and over-deep Structs, as raw request bytes."""
    name = method.name  # type: ignore[attr-defined]
    valid = getattr(pb, method.input_type.name)(runtime_id=PLAYGROUND).SerializeToString() \
        if "runtime_id" in method.input_type.fields_by_name else b""  # type: ignore[attr-defined]

    @examples(15)
    @given(raw=_mutations(valid))
    def run(raw: bytes) -> None:
        CASES[f"raw {name}"] += 1
        if name == "Connect":
            call = lambda: _drain(channel.stream_stream(_path(name))(iter([raw]), timeout=CALL_TIMEOUT))  # noqa: E731
        elif name in STREAMS:
            call = lambda: _drain(channel.unary_stream(_path(name))(raw, timeout=WATCH_TIMEOUT))  # noqa: E731
        else:
            call = lambda: channel.unary_unary(_path(name))(raw, timeout=CALL_TIMEOUT)  # noqa: E731
        code, details = _status(call)
        assert code in (WATCH_PROPER if name in STREAMS else PROPER), (code, details, raw[:80])
        if code is grpc.StatusCode.INVALID_ARGUMENT and "decoded" in details:
            assert "could not be decoded: " in details

    run()


def _huge_struct() -> bytes:
    """A Struct {"k": "zzz…"} of 1.2 MiB, over the fuzz daemon's 1 MiB message limit."""
    return b"\x0a" + _ld(b"\x0a\x01k\x12" + _ld(b"\x1a" + _ld(b"z" * (1200 << 10))))


def _hello(runtime_id: str, llm: bool, resolver: bool) -> bytes:
    return pb.WorkerMessage(hello=pb.WorkerHello(runtime_id=runtime_id, worker_id="fuzz", llm=llm,
                                                 resolver=resolver)).SerializeToString()


def _outcome(call_id: str, metadata: object) -> bytes:
    return pb.WorkerMessage(tool_outcome=pb.ToolOutcome(call_id=call_id, output="x",
                                                        metadata=metadata)).SerializeToString()


frames = st.one_of(
    st.builds(_hello, st.sampled_from([PLAYGROUND, PLAYGROUND, SENTINEL, "", "rt-nope"]), st.booleans(),
              st.booleans()),
    st.builds(_outcome, st.text(max_size=12), structs()),
    messages(pb.WorkerMessage).map(lambda m: m.SerializeToString()),
    st.binary(max_size=64),  # garbage
    st.just(b"\x0a\x06\x0a\x04\xff\xfe\xfd\xfc"),  # a hello whose runtime_id is invalid UTF-8
    st.integers(20, 60).map(lambda d: b"\x12" + _ld(b"\x0a\x01c\x22" + _ld(_raw_struct(d)))),  # deep metadata
    st.just(b"\x12" + _ld(b"\x22" + _ld(_huge_struct()))),  # tool_outcome.metadata past --max-message-bytes
)


@examples(40)
@given(sequence=st.lists(frames, min_size=1, max_size=6), hello_first=st.booleans())
def test_random_worker_streams(channel: grpc.Channel, sentinel: Sentinel, sequence: list[bytes],
                               hello_first: bool) -> None:
    """Replies before the hello, answers for unknown call ids, huge and deep Structs, invalid UTF-8:
    each stream ends by itself with a proper status once the worker stops sending."""
    CASES["Connect sequence"] += 1
    if hello_first:
        sequence = [_hello(PLAYGROUND, False, False), *sequence]
    connect = channel.stream_stream(_path("Connect"))
    code, details = _status(lambda: _drain(connect(iter(sequence), timeout=CALL_TIMEOUT)))
    assert code in PROPER, (code, details, [f[:40] for f in sequence])


def test_the_daemon_and_the_state_it_held_are_intact(daemon: DaemonProcess, stub: pb_grpc.AgentRuntimeStub,
                                                     sentinel: Sentinel) -> None:
    """Runs last: alive, SERVING, the protected runtime unchanged, no error logged, and still resumable."""
    assert daemon.proc is not None and daemon.proc.poll() is None
    with grpc.insecure_channel(daemon.target) as channel:
        health = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
    assert health.status == health_pb2.HealthCheckResponse.SERVING
    assert stub.List(pb.ListRequest(runtime_id=SENTINEL), metadata=KEY, timeout=5) == sentinel.handles
    assert stored_events(stub, SENTINEL) == sentinel.events
    errors = [line for line in daemon.log_lines if '"level": "error"' in line]
    assert not errors, errors[:3]
    answer = pb.Answer(id=sentinel.request_id, ok=True)
    done = stub.Resume(pb.ResumeRequest(runtime_id=SENTINEL, answer=answer), metadata=KEY, timeout=15)
    assert (done.handle, done.result.status) == (sentinel.suspended, "done")
