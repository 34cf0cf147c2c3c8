"""The fuzz suite's daemon, its protected state, hypothesis profiles and the case count.

One daemon serves the whole suite (``--max-message-bytes 1MiB`` so huge
requests hit the limit). Before any fuzzing it gets a ``sentinel`` runtime,
protected by a runtime key the fuzzer never sends, holding a suspended and
an idle handle; the last test checks that state is exactly as it was.

Profiles: ``ci`` (the default) is bounded to a few seconds and derandomized
so CI is repeatable; ``TOOLNEXUS_FUZZ=long`` (``make fuzz``) runs far more
cases with fresh randomness. Every case is counted and the totals are printed
at the end of the run.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

import grpc
import pytest
from hypothesis import HealthCheck, settings

from tests.fuzz.strategies import PLAYGROUND, SENTINEL
from tests.support.daemon import DaemonProcess
from tests.support.grpc_client import approval_agent, native_agent, open_stub, openai_llm
from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_daemon.api._gen import runtime_pb2_grpc as pb_grpc
from toolnexus_devtools import ScriptedModelServer

SENTINEL_KEY = "sentinel-key-never-fuzzed"
KEY = (("x-toolnexus-runtime-key", SENTINEL_KEY),)
CASES: Counter[str] = Counter()

_COMMON = {"deadline": None, "database": None, "print_blob": True,
           "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large,
                                     HealthCheck.function_scoped_fixture]}
settings.register_profile("ci", max_examples=40, derandomize=True, **_COMMON)
settings.register_profile("long", max_examples=1500, **_COMMON)
LONG = os.environ.get("TOOLNEXUS_FUZZ") == "long"


def examples(ci: int) -> settings:
    """Settings for one test: ``ci`` cases in CI, the long profile's count under ``make fuzz``."""
    return settings(settings.get_profile("long" if LONG else "ci"), max_examples=1500 if LONG else ci)


@dataclass(frozen=True)
class Sentinel:
    runtime_id: str
    suspended: str
    idle: str
    request_id: str
    handles: pb.ListResponse
    events: list[pb.Event]


def stored_events(stub: pb_grpc.AgentRuntimeStub, runtime_id: str) -> list[pb.Event]:
    """Every stored event of a runtime (the Watch replay), read until the live tail goes quiet."""
    out: list[pb.Event] = []
    try:
        for event in stub.Watch(pb.WatchRequest(runtime_id=runtime_id), metadata=KEY, timeout=1.0):
            out.append(event)
    except grpc.RpcError as err:
        assert err.code() is grpc.StatusCode.DEADLINE_EXCEEDED, err
    return out


@pytest.fixture(scope="session")
def model() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as srv:
        yield srv


@pytest.fixture(scope="session")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    proc = DaemonProcess(tmp_path_factory.mktemp("fuzz"), "--max-message-bytes", "1MiB")
    proc.start()
    yield proc
    proc.stop()


@pytest.fixture(scope="session")
def channel(daemon: DaemonProcess) -> Iterator[grpc.Channel]:
    """One connection for every case: a new one per case would cost more than the case."""
    channel, _ = open_stub(daemon.target)
    with channel:
        yield channel


@pytest.fixture(scope="session")
def stub(channel: grpc.Channel) -> pb_grpc.AgentRuntimeStub:
    return pb_grpc.AgentRuntimeStub(channel)


@pytest.fixture(scope="session")
def sentinel(stub: pb_grpc.AgentRuntimeStub, model: ScriptedModelServer) -> Sentinel:
    new = pb.NewRequest(runtime_id=SENTINEL, agents=[approval_agent("approver", model.approval_url)],
                        llm=openai_llm(model.url), runtime_key=SENTINEL_KEY)
    stub.New(new, timeout=5)
    spawn = pb.SpawnRequest(runtime_id=SENTINEL, agent="approver")
    suspended = stub.Spawn(spawn, metadata=KEY, timeout=5).handle
    stub.Wake(pb.WakeRequest(runtime_id=SENTINEL, handle=suspended, prompt="ask"), metadata=KEY, timeout=5)
    wait = pb.WaitRequest(runtime_id=SENTINEL, handle=suspended, timeout_ms=10_000)
    pending = stub.Wait(wait, metadata=KEY, timeout=15).pending
    idle = stub.Spawn(spawn, metadata=KEY, timeout=5).handle
    playground = pb.NewRequest(runtime_id=PLAYGROUND, agents=[native_agent("a", "t"), native_agent("b", "t")],
                               llm=openai_llm("http://127.0.0.1:9/v1", retries=-1, timeout_ms=500))
    stub.New(playground, timeout=5)
    stub.Spawn(pb.SpawnRequest(runtime_id=PLAYGROUND, agent="a"), timeout=5)
    listed = stub.List(pb.ListRequest(runtime_id=SENTINEL), metadata=KEY, timeout=5)
    return Sentinel(SENTINEL, suspended, idle, pending.id, listed, stored_events(stub, SENTINEL))


def pytest_sessionfinish(session: pytest.Session) -> None:
    # a pytest-xdist worker's counts go to the controller, which prints the run's total (tests/conftest.py)
    handover = getattr(session.config, "workeroutput", None)
    if handover is not None and CASES:
        handover["fuzz_cases"] = dict(CASES)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if CASES:
        detail = ", ".join(f"{name} {n}" for name, n in sorted(CASES.items()))
        terminalreporter.write_line(f"fuzz: {sum(CASES.values())} cases ({detail})")
