"""JSON log lines carry level, time and the ids an operator greps for, and never a planted secret."""

from __future__ import annotations

import json
from pathlib import Path

import grpc

from tests.support.daemon import DaemonProcess
from tests.support.grpc_client import approval_agent, code_of, open_stub, openai_llm, struct
from toolnexus_daemon.api._gen import runtime_pb2 as pb
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
