"""Prometheus metrics on --metrics-listen, parsed with prometheus_client's own parser."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

import grpc
from prometheus_client.parser import text_string_to_metric_families

from tests.ops.conftest import scrape, serving_record
from tests.support.daemon import DaemonProcess
from tests.support.grpc_client import Worker, approval_agent, code_of, open_stub, openai_llm
from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_daemon.api._gen import runtime_pb2_grpc as pb_grpc
from toolnexus_devtools import ScriptedModelServer

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(text: str) -> Samples:
    """Every sample as (name, labels) -> value; parsing fails loudly on malformed exposition text."""
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def _suspend(stub: pb_grpc.AgentRuntimeStub, rid: str) -> tuple[str, str]:
    handle = stub.Spawn(pb.SpawnRequest(runtime_id=rid, agent="approver"), timeout=5).handle
    stub.Wake(pb.WakeRequest(runtime_id=rid, handle=handle, prompt="do it"), timeout=5)
    result = stub.Wait(pb.WaitRequest(runtime_id=rid, handle=handle, timeout_ms=10_000), timeout=15)
    assert result.status == "pending"
    return handle, result.pending.id


def test_metrics_after_suspend_resume_and_a_restart(tmp_path: Path, model: ScriptedModelServer) -> None:
    """Every family the issue names is present and tells the story of a suspend, resumes and a restart."""
    proc = DaemonProcess(tmp_path / "data", "--metrics-listen", "127.0.0.1:0")
    proc.start()
    try:
        address = serving_record(proc)["metrics_address"]
        channel, stub = open_stub(proc.target)
        with channel:
            agents = [approval_agent("approver", model.approval_url)]
            new = pb.NewRequest(agents=agents, llm=openai_llm(model.url))
            rid = stub.New(new, timeout=5).runtime_id
            assert stub.Info(pb.InfoRequest(), timeout=5).metrics_address == address
            _, first = _suspend(stub, rid)
            watch = stub.Watch(pb.WatchRequest(runtime_id=rid), timeout=30)
            next(watch)  # the stream is open and subscribed
            worker = Worker(stub, rid)
            suspended = parse(scrape(address))
            worker.close()
            watch.cancel()

            approve = pb.ResumeRequest(runtime_id=rid, answer=pb.Answer(id=first, ok=True))
            stub.Resume(approve, timeout=15)
            again = stub.Resume(approve, timeout=15)
            assert again.duplicate
            unknown = pb.ResumeRequest(runtime_id=rid, answer=pb.Answer(id="no-such-request", ok=True))
            assert code_of(lambda: stub.Resume(unknown, timeout=5))[0] is grpc.StatusCode.NOT_FOUND
            _, second = _suspend(stub, rid)
            declined = pb.Answer(id=second, ok=False, reason="declined")
            stub.Resume(pb.ResumeRequest(runtime_id=rid, answer=declined), timeout=15)
            resumed = parse(scrape(address))
            _suspend(stub, rid)  # left parked across the restart
    finally:
        proc.stop()

    assert value(suspended, "toolnexus_runtimes") == 1
    assert value(suspended, "toolnexus_handles", state="suspended") == 1
    assert value(suspended, "toolnexus_suspensions_open", kind="approval") == 1
    assert value(suspended, "toolnexus_suspension_oldest_age_seconds", kind="approval") >= 0
    assert value(suspended, "toolnexus_tool_calls_total", source="webhook", outcome="pending") == 1
    assert value(suspended, "toolnexus_model_calls_total") == 1
    assert value(suspended, "toolnexus_model_call_duration_seconds_count") == 1
    assert value(suspended, "toolnexus_watchers") == 1
    assert value(suspended, "toolnexus_workers_connected") == 1
    assert value(suspended, "toolnexus_store_commit_duration_seconds_count") > 0
    assert value(suspended, "toolnexus_store_commit_batch_records_sum") > 0
    assert value(suspended, "toolnexus_store_size_bytes") > 0
    # the suspension's entry and transcript, held for its answer (--held-memory's default bound)
    assert 0 < value(suspended, "toolnexus_held_bytes") <= value(suspended, "toolnexus_held_limit_bytes")
    assert value(suspended, "toolnexus_held_limit_bytes") == 16 << 20
    ratio = value(suspended, "toolnexus_store_map_used_ratio")
    assert ratio == 0 if proc.store_dsn else 0 < ratio < 1  # PostgreSQL has no map to fill

    assert value(resumed, "toolnexus_resumes_total", outcome="ok") == 1
    # each answer read the entry its own suspension had committed, and the turn it resumed the transcript
    assert value(resumed, "toolnexus_held_reads_total", record="request", outcome="held") >= 3
    assert value(resumed, "toolnexus_held_reads_total", record="transcript", outcome="held") >= 2
    assert value(resumed, "toolnexus_resumes_total", outcome="duplicate") == 1
    assert value(resumed, "toolnexus_resumes_total", outcome="unknown") == 1
    assert value(resumed, "toolnexus_resumes_total", outcome="declined") == 1
    assert value(resumed, "toolnexus_handles", state="suspended") == 0
    assert value(resumed, "toolnexus_handles", state="idle") == 2
    assert value(resumed, "toolnexus_suspensions_open", kind="approval") == 0
    # approved, then declined: the re-asked tool resolves as "declined/expired: ..." (an ok result)
    assert value(resumed, "toolnexus_tool_calls_total", source="webhook", outcome="ok") == 2
    assert value(resumed, "toolnexus_model_calls_total") >= 3
    assert value(resumed, "toolnexus_model_tokens_total", type="prompt") > 0
    assert value(resumed, "toolnexus_model_tokens_total", type="completion") > 0
    assert value(resumed, "toolnexus_watchers") == 0 and value(resumed, "toolnexus_workers_connected") == 0

    proc.start()  # the census of a fresh start comes from the store
    try:
        restarted = parse(scrape(serving_record(proc)["metrics_address"]))
    finally:
        proc.stop()
    assert value(restarted, "toolnexus_handles", state="suspended") == 1
    assert value(restarted, "toolnexus_handles", state="idle") == 2
    assert value(restarted, "toolnexus_suspensions_open", kind="approval") == 1


def test_the_metrics_endpoint_answers_only_get_metrics(tmp_path: Path) -> None:
    with DaemonProcess(tmp_path / "data", "--metrics-listen", "127.0.0.1:0") as proc:
        address = serving_record(proc)["metrics_address"]
        for path, method, status in (("/nope", "GET", 404), ("/metrics", "POST", 405)):
            data = b"" if method == "POST" else None
            request = urllib.request.Request(f"http://{address}{path}", method=method, data=data)
            try:
                urllib.request.urlopen(request, timeout=5)  # noqa: S310  # loopback
            except urllib.error.HTTPError as err:
                assert err.code == status
            else:
                raise AssertionError(f"{method} {path} was answered")
        assert "toolnexus_build_info" in scrape(address)


def test_the_metrics_port_serves_health_for_http_probes(tmp_path: Path) -> None:
    """``GET /healthz`` says what gRPC health says: SERVING once the daemon serves."""
    with DaemonProcess(tmp_path / "data", "--metrics-listen", "127.0.0.1:0") as proc:
        address = serving_record(proc)["metrics_address"]
        with urllib.request.urlopen(f"http://{address}/healthz", timeout=5) as reply:  # noqa: S310  # loopback
            assert reply.status == 200 and reply.headers["Cache-Control"] == "no-store"
            assert json.loads(reply.read()) == {"status": "SERVING"}
