"""Bearer-token authentication: every call but health needs ``authorization: Bearer <token>``."""

from __future__ import annotations

from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.support.daemon import DaemonProcess
from tests.support.grpc_client import code_of, open_stub
from toolnexus_daemon.api._gen import runtime_pb2 as pb

TOKEN = "t0ken-for-tests"


def test_calls_without_the_token_are_unauthenticated(tmp_path: Path) -> None:
    proc = DaemonProcess(tmp_path / "data", "--auth-token-env", "TND_TEST_TOKEN",
                         env={"TND_TEST_TOKEN": TOKEN})
    try:
        channel, stub = open_stub(proc.start().target)
        with channel:
            health = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
            assert health.status == health_pb2.HealthCheckResponse.SERVING
            code, details = code_of(lambda: stub.Info(pb.InfoRequest(), timeout=5))
            assert code is grpc.StatusCode.UNAUTHENTICATED and "Bearer" in details
            wrong = (("authorization", "Bearer nope"),)
            watch = pb.WatchRequest(runtime_id="x")
            code, _ = code_of(lambda: list(stub.Watch(watch, metadata=wrong, timeout=5)))
            assert code is grpc.StatusCode.UNAUTHENTICATED
            right = (("authorization", f"Bearer {TOKEN}"),)
            assert stub.Info(pb.InfoRequest(), metadata=right, timeout=5).version
    finally:
        proc.stop()
    assert TOKEN not in proc.logs()
