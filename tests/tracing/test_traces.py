"""Traces of a real daemon exported over OTLP/HTTP to a real receiver (docs/observability.md).

The daemon runs as a subprocess with ``--otlp-endpoint`` pointed at the receiver in the test;
the model and the approval webhook are the scripted model server. A run suspends on the
webhook's approval request, the daemon is killed with SIGKILL, started again and the request
answered: the turn that continues is a span of the same trace, linked to the span that
suspended.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.daemon import DaemonProcess
from tests.support.grpc_client import approval_agent, open_stub, openai_llm
from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_daemon.api._gen import runtime_pb2_grpc as pb_grpc
from toolnexus_daemon.model import JSON
from toolnexus_devtools import ScriptedModelServer
from toolnexus_devtools.model_server import (
    APPROVAL_PATH,
    MESSAGES_PATH,
    MODEL_PATH,
    Reply,
    chat_response,
    mock_model,
    tool_call,
)

from .collector import Collector, Span

AGENT = "approver"
PROMPT = "please do the secret thing"
# the caller's span, as an app's tracer would send it
CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER = f"00-{CALLER_TRACE}-00f067aa0ba902b7-01"
RESUMER = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
# export batches quickly, so a test does not wait the default five seconds
FAST_EXPORT = {"OTEL_BSP_SCHEDULE_DELAY": "50", "OTEL_SERVICE_NAME": "traced-daemon"}


@pytest.fixture
def traced(tmp_path: Path, collector: Collector) -> Iterator[DaemonProcess]:
    proc = DaemonProcess(tmp_path / "data", "--otlp-endpoint", collector.url, env=FAST_EXPORT).start()
    try:
        yield proc
    finally:
        proc.stop()


def suspend(stub: pb_grpc.AgentRuntimeStub, model: ScriptedModelServer,
            metadata: tuple[tuple[str, str], ...] = ()) -> tuple[str, str, pb.Request]:
    new = pb.NewRequest(agents=[approval_agent(AGENT, model.approval_url)], llm=openai_llm(model.url))
    rid = stub.New(new, timeout=10).runtime_id
    handle = stub.Spawn(pb.SpawnRequest(runtime_id=rid, agent=AGENT), timeout=10).handle
    woke = stub.Wake(pb.WakeRequest(runtime_id=rid, handle=handle, prompt=PROMPT, wait_ms=20_000),
                     timeout=30, metadata=metadata)
    assert woke.result.status == "pending", woke
    return rid, handle, woke.result.pending


def resume(stub: pb_grpc.AgentRuntimeStub, rid: str, request: pb.Request,
           metadata: tuple[tuple[str, str], ...] = ()) -> pb.ResumeResponse:
    out = stub.Resume(pb.ResumeRequest(runtime_id=rid, answer=pb.Answer(id=request.id, ok=True)),
                      timeout=30, metadata=metadata)
    assert out.result.text == "action performed", out
    return out


def named(spans: list[Span], name: str) -> list[Span]:
    return [s for s in spans if s.name == name]


def children(spans: list[Span], parent: Span) -> list[Span]:
    return [s for s in spans if s.parent_id == parent.span_id and s.trace_id == parent.trace_id]


def traceparents(model: ScriptedModelServer, path: str) -> list[str]:
    """The trace and span ids of each request's ``traceparent`` to ``path`` ("" when it had none)."""
    return ["-".join(r.headers.get("traceparent", "").split("-")[1:3]) for r in model.received
            if r.path == path]


def test_a_suspended_run_is_one_trace_across_kill9(traced: DaemonProcess, collector: Collector,
                                                   model_server: ScriptedModelServer) -> None:
    channel, stub = open_stub(traced.target)
    with channel:
        rid, handle, request = suspend(stub, model_server, (("traceparent", CALLER),))
    first = collector.wait_for(lambda s: len(named(s, f"invoke_agent {AGENT}")) == 1
                               and len(named(s, "execute_tool approve")) == 1)
    turn = named(first, f"invoke_agent {AGENT}")[0]
    # a child of the caller's span, in the caller's trace
    assert (turn.trace_id, turn.parent_id) == (CALLER_TRACE, "00f067aa0ba902b7")
    assert turn.kind == "internal"
    assert turn.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert turn.attributes["gen_ai.agent.name"] == AGENT
    assert turn.attributes["gen_ai.conversation.id"] == rid
    assert turn.attributes["toolnexus.handle"] == handle
    assert turn.resource["service.name"] == "traced-daemon"
    # suspended: an event with the request's id and kind, never its prompt
    assert turn.events == [("toolnexus.suspended", {"toolnexus.request.id": request.id,
                                                    "toolnexus.request.kind": "approval"})]
    chat, tool = sorted(children(first, turn), key=lambda s: s.name)
    assert chat.name == "chat scripted" and chat.kind == "client"
    assert chat.attributes["gen_ai.operation.name"] == "chat"
    assert chat.attributes["gen_ai.provider.name"] == "openai"
    assert chat.attributes["gen_ai.request.model"] == "scripted"
    assert chat.attributes["gen_ai.response.model"] == "scripted"
    # the scripted reference model's usage for a tool call: 3 prompt, 2 completion
    usage = (chat.attributes["gen_ai.usage.input_tokens"], chat.attributes["gen_ai.usage.output_tokens"])
    assert usage == (3, 2)
    assert chat.attributes["gen_ai.response.finish_reasons"] == ["tool_calls"]
    assert tool.name == "execute_tool approve"
    assert tool.attributes["gen_ai.tool.name"] == "approve"
    assert tool.attributes["gen_ai.tool.call.id"] == "call_1"
    assert tool.attributes["toolnexus.outcome"] == "pending"
    # traceparent out: the model request carries its chat span, the webhook its tool span
    assert traceparents(model_server, MODEL_PATH) == [chat.ids]
    assert traceparents(model_server, APPROVAL_PATH) == [tool.ids]

    traced.kill9()  # between the suspension and its answer
    traced.start()
    channel, stub = open_stub(traced.target)
    with channel:
        resume(stub, rid, request)
    spans = collector.wait_for(lambda s: len(named(s, f"invoke_agent {AGENT}")) == 2
                               and len(named(s, "chat scripted")) == 2)
    later = next(s for s in named(spans, f"invoke_agent {AGENT}") if s.span_id != turn.span_id)
    # the same trace, under the same caller, linked to the span that suspended
    assert (later.trace_id, later.parent_id) == (CALLER_TRACE, "00f067aa0ba902b7")
    assert later.links == [(turn.trace_id, turn.span_id)]
    assert later.events == [] and later.status != 2
    kids = children(spans, later)
    assert sorted(s.name for s in kids) == ["chat scripted", "execute_tool approve"]
    final = next(s for s in kids if s.name == "chat scripted")
    usage = (final.attributes["gen_ai.usage.input_tokens"], final.attributes["gen_ai.usage.output_tokens"])
    assert usage == (2, 1)
    assert final.attributes["gen_ai.response.finish_reasons"] == ["stop"]
    again = next(s for s in kids if s.name == "execute_tool approve")
    assert again.attributes["toolnexus.outcome"] == "ok"
    assert traceparents(model_server, APPROVAL_PATH)[1] == again.ids
    assert traceparents(model_server, MODEL_PATH)[1] == final.ids


def test_no_content_in_spans_by_default(traced: DaemonProcess, collector: Collector,
                                        model_server: ScriptedModelServer) -> None:
    channel, stub = open_stub(traced.target)
    with channel:
        suspend(stub, model_server)
    spans = collector.wait_for(lambda s: len(named(s, "execute_tool approve")) == 1
                               and len(named(s, f"invoke_agent {AGENT}")) == 1)
    turn = named(spans, f"invoke_agent {AGENT}")[0]
    assert turn.parent_id == ""  # no caller: a trace of its own
    for s in spans:
        assert not any(key.startswith(("gen_ai.input", "gen_ai.output", "gen_ai.tool.call.arguments",
                                       "gen_ai.tool.call.result")) for key in s.attributes), s
    assert not any(PROMPT.encode() in body or b"approve?" in body for body in collector.bodies)


def test_content_with_the_flag(tmp_path: Path, collector: Collector,
                               model_server: ScriptedModelServer) -> None:
    with DaemonProcess(tmp_path / "data", "--otlp-endpoint", collector.url, "--otel-capture-content",
                       env=FAST_EXPORT) as proc:
        channel, stub = open_stub(proc.target)
        with channel:
            suspend(stub, model_server)
        spans = collector.wait_for(lambda s: len(named(s, "execute_tool approve")) == 1)
    chat = named(spans, "chat scripted")[0]
    assert PROMPT in chat.attributes["gen_ai.input.messages"]
    assert '"tool_call"' in chat.attributes["gen_ai.output.messages"]
    tool = named(spans, "execute_tool approve")[0]
    assert tool.attributes["gen_ai.tool.call.arguments"] == "{}"


def test_a_resume_under_a_trace_continues_under_its_caller(traced: DaemonProcess, collector: Collector,
                                                            model_server: ScriptedModelServer) -> None:
    channel, stub = open_stub(traced.target)
    with channel:
        rid, _, request = suspend(stub, model_server)
        resume(stub, rid, request, (("traceparent", RESUMER),))
    spans = collector.wait_for(lambda s: len(named(s, f"invoke_agent {AGENT}")) == 2)
    first, later = sorted(named(spans, f"invoke_agent {AGENT}"), key=lambda s: bool(s.links))
    assert later.trace_id == RESUMER.split("-")[1]
    assert later.parent_id == RESUMER.split("-")[2]
    assert later.links == [(first.trace_id, first.span_id)]


def test_off_by_default_nothing_is_sent(tmp_path: Path, collector: Collector,
                                        model_server: ScriptedModelServer) -> None:
    """Without an endpoint no span is made: requests carry no traceparent, even a caller's."""
    with DaemonProcess(tmp_path / "data", env={"OTEL_EXPORTER_OTLP_ENDPOINT": ""}) as proc:
        channel, stub = open_stub(proc.target)
        with channel:
            suspend(stub, model_server, (("traceparent", CALLER),))
    assert traceparents(model_server, MODEL_PATH) == [""]
    assert traceparents(model_server, APPROVAL_PATH) == [""]
    assert collector.spans == []


def test_the_standard_variable_turns_tracing_on(tmp_path: Path, collector: Collector,
                                                model_server: ScriptedModelServer) -> None:
    env = {**FAST_EXPORT, "OTEL_EXPORTER_OTLP_ENDPOINT": collector.url}
    with DaemonProcess(tmp_path / "data", env=env) as proc:
        channel, stub = open_stub(proc.target)
        with channel:
            suspend(stub, model_server)
        collector.wait_for(lambda s: len(named(s, f"invoke_agent {AGENT}")) == 1)


def manager_script(body: JSON) -> JSON:
    """The manager delegates to the approver with ``task`` and reports its answer; the approver is
    the reference mock model (it calls its approval tool, then answers with the tool's output)."""
    messages = body.get("messages") or []
    if messages and messages[0].get("content") != "manager":
        return mock_model(body)
    told = [m for m in messages if m.get("role") == "tool"]
    if told:
        return chat_response(content=str(told[0].get("content")), usage=(4, 1, 5))
    return chat_response(tool_calls=[tool_call("task", {"agent": AGENT, "prompt": "get it approved"})],
                         usage=(6, 3, 9))


def test_a_task_child_runs_under_its_parents_tool_span(traced: DaemonProcess, collector: Collector,
                                                       model_server: ScriptedModelServer) -> None:
    model_server.script = manager_script
    manager = pb.AgentDef(name="manager", does="delegates", soul="manager", team=[AGENT])
    channel, stub = open_stub(traced.target)
    with channel:
        new = pb.NewRequest(agents=[manager, approval_agent(AGENT, model_server.approval_url)],
                            llm=openai_llm(model_server.url))
        rid = stub.New(new, timeout=10).runtime_id
        handle = stub.Spawn(pb.SpawnRequest(runtime_id=rid, agent="manager", prompt="go", wait_ms=20_000),
                            timeout=30)
        assert handle.result.status == "pending", handle
        resume(stub, rid, handle.result.pending)
    spans = collector.wait_for(lambda s: len(named(s, f"invoke_agent {AGENT}")) == 2
                               and len(named(s, "invoke_agent manager")) == 2)
    assert len({s.trace_id for s in spans}) == 1  # delegation, suspension and answer: one trace
    first_manager = next(s for s in named(spans, "invoke_agent manager") if not s.links)
    task = next(s for s in children(spans, first_manager) if s.name == "execute_tool task")
    assert task.attributes["toolnexus.outcome"] == "pending"
    child_turns = named(spans, f"invoke_agent {AGENT}")
    # the child's turn, and its continuation after the answer, hang under the task call's span
    assert {s.parent_id for s in child_turns} == {task.span_id}
    later_manager = next(s for s in named(spans, "invoke_agent manager") if s.links)
    assert later_manager.parent_id == first_manager.span_id
    assert later_manager.links == [(first_manager.trace_id, first_manager.span_id)]


@pytest.mark.parametrize(("style", "stream", "path", "finish"), [
    ("openai", True, MODEL_PATH, "tool_calls"),
    ("anthropic", False, MESSAGES_PATH, "tool_use"),
    ("anthropic", True, MESSAGES_PATH, "tool_use"),
])
def test_model_spans_of_every_http_style(traced: DaemonProcess, collector: Collector,
                                         model_server: ScriptedModelServer, style: str, stream: bool,
                                         path: str, finish: str) -> None:
    """What the server reported (model, usage, finish reason) and the traceparent sent, streamed or
    not."""
    llm = pb.LlmConfig(style=style, base_url=model_server.url, model="scripted", stream=stream,
                       timeout_ms=5000)
    channel, stub = open_stub(traced.target)
    with channel:
        new = pb.NewRequest(agents=[approval_agent(AGENT, model_server.approval_url)], llm=llm)
        rid = stub.New(new, timeout=10).runtime_id
        spawn = pb.SpawnRequest(runtime_id=rid, agent=AGENT, prompt="go", wait_ms=20_000)
        out = stub.Spawn(spawn, timeout=30)
        assert out.result.status == "pending", out
    spans = collector.wait_for(lambda s: len(named(s, "chat scripted")) == 1)
    chat = named(spans, "chat scripted")[0]
    assert chat.attributes["gen_ai.provider.name"] == style
    assert chat.attributes["gen_ai.response.model"] == "scripted"
    assert chat.attributes["gen_ai.response.finish_reasons"] == [finish]
    usage = (chat.attributes["gen_ai.usage.input_tokens"], chat.attributes["gen_ai.usage.output_tokens"])
    assert usage == (3, 2)
    assert traceparents(model_server, path) == [chat.ids]


def test_a_failed_model_call_marks_its_spans(traced: DaemonProcess, collector: Collector,
                                             model_server: ScriptedModelServer) -> None:
    model_server.push(Reply(status=400, body={"error": {"message": "no such model"}}))
    channel, stub = open_stub(traced.target)
    with channel:
        new = pb.NewRequest(agents=[approval_agent(AGENT, model_server.approval_url)],
                            llm=openai_llm(model_server.url))
        rid = stub.New(new, timeout=10).runtime_id
        spawn = pb.SpawnRequest(runtime_id=rid, agent=AGENT, prompt="go", wait_ms=20_000)
        out = stub.Spawn(spawn, timeout=30)
        assert out.result.status == "error", out
    spans = collector.wait_for(lambda s: len(named(s, f"invoke_agent {AGENT}")) == 1)
    turn, chat = named(spans, f"invoke_agent {AGENT}")[0], named(spans, "chat scripted")[0]
    assert chat.parent_id == turn.span_id
    assert (chat.status, turn.status) == (2, 2)  # error
    assert "400" in chat.status_message
    assert turn.attributes["toolnexus.result.status"] == "error"


def test_a_collector_that_is_down_does_not_hold_up_a_stop(tmp_path: Path) -> None:
    """The spans still batched get about two seconds at SIGTERM (the SDK alone waits for its retries)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}"  # bound, never listening: refused
        with ScriptedModelServer() as model:
            proc = DaemonProcess(tmp_path / "data", "--otlp-endpoint", closed, env=FAST_EXPORT).start()
            try:
                channel, stub = open_stub(proc.target)
                with channel:
                    suspend(stub, model)
            finally:
                started = time.monotonic()
                code = proc.stop(timeout=30)
        assert code == 0 and time.monotonic() - started < 6, (code, proc.logs()[-2000:])


def test_off_loads_nothing_of_the_sdk(tmp_path: Path) -> None:
    """Without an endpoint the daemon builds the no-op tracer and never imports the SDK."""
    script = ("import sys\n"
              "from toolnexus_daemon.app import _tracer\n"
              "from toolnexus_daemon.config import load\n"
              "from toolnexus_daemon.engine.turn.tracing import NOOP\n"
              f"assert _tracer(load(['--data-dir', {str(tmp_path)!r}], {{}})) is NOOP\n"
              "print(sorted(m for m in sys.modules if m.startswith('opentelemetry.sdk')))\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_EXPORTER_OTLP")}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def two_tasks_script(body: JSON) -> JSON:
    """The manager delegates twice in one step; the members answer "ok" (the reference mock)."""
    messages = body.get("messages") or []
    if messages and messages[0].get("content") != "manager":
        return mock_model(body)
    if any(m.get("role") == "tool" for m in messages):
        return chat_response(content="both done", usage=(4, 1, 5))
    calls = [tool_call("task", {"agent": "plain", "prompt": f"part {i}"}, id=f"call_{i}") for i in (1, 2)]
    return chat_response(tool_calls=calls, usage=(6, 3, 9))


def test_a_queued_wake_keeps_its_callers_trace(traced: DaemonProcess, collector: Collector,
                                               model_server: ScriptedModelServer) -> None:
    """With one running child allowed, the second ``task`` call's wake is queued; the turn that
    consumes it later is still a child of that call's span."""
    model_server.script = two_tasks_script
    manager = pb.AgentDef(name="manager", does="delegates", soul="manager", team=["plain"],
                          budget=pb.Budget(max_concurrent=1))
    plain = pb.AgentDef(name="plain", does="answers", soul="plain")
    channel, stub = open_stub(traced.target)
    with channel:
        rid = stub.New(pb.NewRequest(agents=[manager, plain], llm=openai_llm(model_server.url)),
                       timeout=10).runtime_id
        out = stub.Spawn(pb.SpawnRequest(runtime_id=rid, agent="manager", prompt="go", wait_ms=20_000),
                         timeout=30)
        assert out.result.text == "both done", out
    spans = collector.wait_for(lambda s: len(named(s, "invoke_agent plain")) == 2
                               and len(named(s, "invoke_agent manager")) == 1)
    tasks = {s.attributes["gen_ai.tool.call.id"]: s for s in named(spans, "execute_tool task")}
    members = named(spans, "invoke_agent plain")
    assert sorted(s.parent_id for s in members) == sorted(t.span_id for t in tasks.values())
    assert len({s.trace_id for s in spans}) == 1


@pytest.mark.parametrize("bad", ["garbage", "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
                                 "00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01"])
def test_a_malformed_traceparent_is_ignored(traced: DaemonProcess, collector: Collector,
                                            model_server: ScriptedModelServer, bad: str) -> None:
    """Tracing never refuses a call: a traceparent that is not W3C's is dropped (a trace of its own)."""
    channel, stub = open_stub(traced.target)
    with channel:
        suspend(stub, model_server, (("traceparent", bad),))
    spans = collector.wait_for(lambda s: len(named(s, f"invoke_agent {AGENT}")) == 1)
    assert named(spans, f"invoke_agent {AGENT}")[0].parent_id == ""
