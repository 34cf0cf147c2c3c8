"""Fixtures: the real daemon subprocess, a gRPC stub to it, and a scripted model server.

One daemon serves a whole test module (each test makes its own runtime, so
tests stay independent) because starting one costs most of a second; tests
that restart or kill a daemon get their own with ``own_daemon``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from tests.support.daemon import DaemonProcess
from tests.support.grpc_client import open_stub
from toolnexus_daemon.api._gen import runtime_pb2_grpc as pb_grpc
from toolnexus_devtools import ScriptedModelServer


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    proc = DaemonProcess(tmp_path_factory.mktemp("data"))
    proc.start()
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def channel(daemon: DaemonProcess) -> Iterator[grpc.Channel]:
    ch, _ = open_stub(daemon.target)
    yield ch
    ch.close()


@pytest.fixture(scope="module")
def stub(channel: grpc.Channel) -> pb_grpc.AgentRuntimeStub:
    return pb_grpc.AgentRuntimeStub(channel)


@pytest.fixture
def model() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as srv:
        yield srv


@pytest.fixture
def own_daemon(tmp_path: Path) -> Iterator[DaemonProcess]:
    proc = DaemonProcess(tmp_path / "data")
    yield proc
    proc.stop()
