"""JSON log lines carry level, time and the ids an operator greps for, and never a planted secret."""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path

import grpc

from tests.support.daemon import DaemonProcess
from tests.support.grpc_client import approval_agent, code_of, open_stub, openai_llm, struct
from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_daemon.model import Event, EventType, Request, Status, TaskResult
from toolnexus_daemon.observe import logs
from toolnexus_devtools import ScriptedModelServer

TOKEN = "PLANTED-bearer-token-4b1d"
API_KEY = "sk-PLANTED-api-key-93ce"
HEADER = "PLANTED-header-value-5e7a"
TOOL_HEADER = "PLANTED-tool-header-0c2f"
ANSWER = "PLANTED-answer-data-77d1"
RUNTIME_KEY = "PLANTED-runtime-key-a8e0"
SECRETS = (TOKEN, API_KEY, HEADER, TOOL_HEADER, ANSWER, RUNTIME_KEY)


def test_no_log_line_contains_a_planted_secret(tmp_path: Path, model: ScriptedModelServer) -> None:
    """At debug level, through auth refusals, model calls, a webhook suspension and a Resume with data."""
    env = {"TOOLNEXUS_TOKEN": TOKEN, "TND_PLANTED_KEY": API_KEY, "TND_PLANTED_HDR": TOOL_HEADER}
    proc = DaemonProcess(tmp_path / "data", "--log-level", "debug", "--allow-env", "TND_PLANTED_*", env=env)
    with proc:
        channel, stub = open_stub(proc.target)
        auth = (("authorization", f"Bearer {TOKEN}"), ("x-toolnexus-runtime-key", RUNTIME_KEY))
        with channel:
            wrong = (("authorization", f"Bearer {TOKEN}x"),)
            code, _ = code_of(lambda: stub.Info(pb.InfoRequest(), metadata=wrong, timeout=5))
            assert code is grpc.StatusCode.UNAUTHENTICATED
            agent = approval_agent("approver", model.approval_url)
            agent.tools[0].http.headers["X-Tool-Secret"] = "${TND_PLANTED_HDR}"
            llm = openai_llm(model.url)
            llm.api_key_env = "TND_PLANTED_KEY"
            llm.headers["X-Custom"] = HEADER
            new = pb.NewRequest(agents=[agent], llm=llm, runtime_key=RUNTIME_KEY)
            rid = stub.New(new, metadata=auth, timeout=5).runtime_id
            spawn = pb.SpawnRequest(runtime_id=rid, agent="approver")
            handle = stub.Spawn(spawn, metadata=auth, timeout=5).handle
            stub.Wake(pb.WakeRequest(runtime_id=rid, handle=handle, prompt="go"), metadata=auth, timeout=5)
            wait = pb.WaitRequest(runtime_id=rid, handle=handle, timeout_ms=10_000)
            pending = stub.Wait(wait, metadata=auth, timeout=15).pending
            answer = pb.Answer(id=pending.id, ok=True, data=struct({"otp": ANSWER}))
            done = stub.Resume(pb.ResumeRequest(runtime_id=rid, answer=answer), metadata=auth, timeout=15)
            assert done.result.status == "done"
            snapshot = pb.SnapshotRequest(runtime_id=rid, handle=handle)
            code, _ = code_of(lambda: stub.Snapshot(snapshot, metadata=auth[:1], timeout=5))
            assert code is grpc.StatusCode.PERMISSION_DENIED
    # the secrets did travel: the model saw the key and header, the webhook its header and the answer
    sent = next(r for r in model.received if r.path.endswith("/chat/completions"))
    assert sent.headers["authorization"] == f"Bearer {API_KEY}" and sent.headers["x-custom"] == HEADER
    hooks = [r for r in model.received if r.path.endswith("/tools/approval")]
    assert hooks[0].headers["x-tool-secret"] == TOOL_HEADER and ANSWER in hooks[-1].body.decode()

    records = [json.loads(line) for line in proc.log_lines]
    assert all({"time", "level", "msg"} <= rec.keys() for rec in records)
    for secret in SECRETS:
        leaked = [line for line in proc.log_lines if secret in line]
        assert not leaked, f"{secret} leaked into the log: {leaked}"
    suspended = next(r for r in records if r["msg"] == "handle suspended")
    assert (suspended["runtime"], suspended["handle"], suspended["request_id"]) == (rid, handle, pending.id)
    assert any(r["msg"] == "tool call" and r.get("call_id") for r in records)
    assert any(r["msg"] == "rpc" and r.get("method") == "Resume" and r.get("request_id") == pending.id
               for r in records)
    assert any(r["msg"] == "rpc" and r.get("code") == "UNAUTHENTICATED" for r in records)


def test_event_lines_are_written_exactly_as_operators_read_them() -> None:
    """Each kind of event line, at info and at debug, field for field and in order (the two info
    lines skip the logger's look-up of the caller and build their fields only for themselves)."""
    evs = [Event(1, "r", "h", EventType.PENDING, pending=Request(id="q", kind="approval", prompt="p")),
           Event(2, "r", "h", EventType.PENDING),
           Event(3, "r", "h", EventType.RESUMED, data={"request_id": "q", "ok": 1}),
           Event(4, "r", "h", EventType.RESUMED),
           Event(5, "r", "h", EventType.TRANSITION, from_state="idle", to_state="running"),
           Event(6, "r", "h", EventType.TOOL_RESULT, data={"call_id": "c", "tool": "t", "source": "native",
                                                           "outcome": "ok", "latency_ms": 3}),
           Event(7, "r", "h", EventType.MODEL_CALL, data={"usage": {"total_tokens": 5}, "latency_ms": 2}),
           Event(8, "r", "h", EventType.RESULT,
                 result=TaskResult(status=Status.DONE, text="x", is_error=False)),
           Event(9, "r", "h", EventType.SPAWNED, data={"agent": "a"})]
    ids = {"logger": "toolnexus_daemon.events", "runtime": "r", "handle": "h"}
    info = [{"level": "info", "msg": "handle suspended", **ids, "seq": 1, "request_id": "q",
             "kind": "approval"},
            {"level": "info", "msg": "answer accepted", **ids, "seq": 3, "request_id": "q", "ok": True},
            {"level": "info", "msg": "answer accepted", **ids, "seq": 4, "request_id": "", "ok": False}]
    debug = [info[0], info[1], info[2],
             {"level": "debug", "msg": "transition", **ids, "seq": 5, "from": "idle", "to": "running"},
             {"level": "debug", "msg": "tool call", **ids, "seq": 6, "call_id": "c", "tool": "t",
              "source": "native", "outcome": "ok", "latency_ms": 3},
             {"level": "debug", "msg": "model call", **ids, "seq": 7, "usage_total": 5, "latency_ms": 2},
             {"level": "debug", "msg": "turn settled", **ids, "seq": 8, "status": "done"}]
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        for level, expected in (("info", info), ("debug", debug)):
            out = io.StringIO()
            logs.configure(level, out)
            logs.log_events("r", evs)
            lines = [json.loads(line) for line in out.getvalue().splitlines()]
            assert all(line.pop("time").endswith("Z") for line in lines)
            assert [list(line.items()) for line in lines] == [list(e.items()) for e in expected]
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
