"""A suspended run stays one trace when another daemon of a cluster continues it.

Two daemons on one real PostgreSQL database, both exporting to the receiver in the test: the
runtime's owner is killed with SIGKILL while the handle is suspended, the answer is sent to the
other daemon, which takes the runtime over and runs the turn that continues — a span of the same
trace, under the caller's span, linked to the span the killed daemon ended at the suspension.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.test_cluster import LEASE_MS, Node, _retry
from tests.support.grpc_client import approval_agent, openai_llm
from tests.support.pg_fixtures import pg_dsn, pg_server
from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_devtools import ScriptedModelServer

from .collector import Collector

__all__ = ["pg_dsn", "pg_server"]

CALLER = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
EXPORT = {"OTEL_BSP_SCHEDULE_DELAY": "50"}


@pytest.fixture
def nodes(pg_dsn: str, tmp_path: Path, collector: Collector) -> Iterator[dict[str, Node]]:
    env = {**EXPORT, "OTEL_EXPORTER_OTLP_ENDPOINT": collector.url}
    made = {name: Node(name, pg_dsn, tmp_path, env=env) for name in ("a", "b")}
    try:
        for node in made.values():
            node.start()
        yield made
    finally:
        for node in made.values():
            node.close()


def test_another_daemon_continues_the_same_trace(nodes: dict[str, Node], collector: Collector,
                                                 model_server: ScriptedModelServer) -> None:
    a, b = nodes["a"], nodes["b"]
    new = pb.NewRequest(agents=[approval_agent("approver", model_server.approval_url)],
                        llm=openai_llm(model_server.url))
    rid = a.stub.New(new, timeout=10).runtime_id
    out = a.stub.Spawn(pb.SpawnRequest(runtime_id=rid, agent="approver", prompt="go", wait_ms=15_000),
                       timeout=20, metadata=(("traceparent", CALLER),))
    assert out.result.status == "pending", out
    first = collector.wait_for(lambda s: any(x.name == "invoke_agent approver" for x in s))
    suspended = next(s for s in first if s.name == "invoke_agent approver")
    assert suspended.resource["service.name"] == "toolnexus-daemon"
    a.proc.kill9()
    done = _retry(lambda: b.stub.Resume(
        pb.ResumeRequest(runtime_id=rid, answer=pb.Answer(id=out.result.pending.id, ok=True)), timeout=20),
        deadline_s=4 * LEASE_MS / 1000 + 10)
    assert done.result.text == "action performed"
    spans = collector.wait_for(lambda s: sum(x.name == "invoke_agent approver" for x in s) == 2)
    later = next(s for s in spans if s.name == "invoke_agent approver" and s.span_id != suspended.span_id)
    assert (later.trace_id, later.parent_id) == (suspended.trace_id, suspended.parent_id)
    assert later.trace_id == CALLER.split("-")[1]
    assert later.links == [(suspended.trace_id, suspended.span_id)]
