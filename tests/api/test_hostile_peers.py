"""Hostile model servers and webhooks cannot poison a runtime.

A real daemon, a real scripted model server and a real webhook route on 127.0.0.1. Each hostile
reply becomes an error of its call or turn, and afterwards every read of the runtime — Wait,
Snapshot (root included), List, Watch — still works, before and after a restart. Records written
before the bounds existed are read back clamped rather than failing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import lmdb
import pytest

from tests.support.daemon import DaemonProcess
from tests.support.grpc_client import open_stub, openai_llm
from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_daemon.api._gen import runtime_pb2_grpc as pb_grpc
from toolnexus_daemon.model import JSON
from toolnexus_daemon.store.codec import Table, decode_value, encode_value, pair_key
from toolnexus_devtools import Reply, ScriptedModelServer, chat_response, tool_call

MIB = 1024 * 1024


def deep(levels: int) -> JSON:
    value: JSON = {"leaf": 1}
    for _ in range(levels):
        value = {"d": value}
    return value


class Peer:
    """A daemon with one runtime whose agent uses the webhook tool ``hook``."""

    def __init__(self, data_dir: Path, model: ScriptedModelServer, *args: str) -> None:
        self.model = model
        self.data_dir = data_dir
        self.proc = DaemonProcess(data_dir, *args).start()
        self.channel, self.stub = open_stub(self.proc.target)
        hook = pb.ToolDef(name="hook", source="webhook", http=pb.HttpConfig(url=model.origin + "/hook"))
        agent = pb.AgentDef(name="worker", does="works", tools=[hook])
        new = pb.NewRequest(agents=[agent], llm=openai_llm(model.url))
        self.rid = self.stub.New(new, timeout=10).runtime_id
        self.handle = self.stub.Spawn(pb.SpawnRequest(runtime_id=self.rid, agent="worker"), timeout=10).handle

    def turn(self, prompt: str = "go") -> pb.TaskResult:
        self.stub.Wake(pb.WakeRequest(runtime_id=self.rid, handle=self.handle, prompt=prompt), timeout=10)
        wait = pb.WaitRequest(runtime_id=self.rid, handle=self.handle, timeout_ms=20_000)
        return self.stub.Wait(wait, timeout=30)

    def restart(self) -> None:
        self.channel.close()
        assert self.proc.stop() == 0
        self.proc = DaemonProcess(self.data_dir).start()
        self.channel, self.stub = open_stub(self.proc.target)

    def close(self) -> None:
        self.channel.close()
        self.proc.stop()


def assert_readable(peer: Peer) -> None:
    """Every read path of the runtime answers (no INTERNAL, no oversized message)."""
    stub: pb_grpc.AgentRuntimeStub = peer.stub
    for handle in ("root", peer.handle):
        stub.Snapshot(pb.SnapshotRequest(runtime_id=peer.rid, handle=handle), timeout=10)
    stub.List(pb.ListRequest(runtime_id=peer.rid), timeout=10)
    stub.Wait(pb.WaitRequest(runtime_id=peer.rid, handle=peer.handle, timeout_ms=1), timeout=10)
    seen = 0
    try:
        for _ in stub.Watch(pb.WatchRequest(runtime_id=peer.rid, after_seq=0), timeout=1.5):
            seen += 1
    except grpc.RpcError as err:
        assert err.code() is grpc.StatusCode.DEADLINE_EXCEEDED, err
    assert seen > 0


@pytest.fixture
def model() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as server:
        yield server


@pytest.fixture
def peer(tmp_path: Path, model: ScriptedModelServer) -> Iterator[Peer]:
    p = Peer(tmp_path / "data", model)
    try:
        yield p
    finally:
        p.close()


def raw_reply(message: JSON, usage: JSON | None = None) -> JSON:
    return {"id": "c", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": "stop"}],
            "usage": usage or {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}


HOSTILE_MODEL_REPLIES: dict[str, tuple[JSON, str]] = {
    "usage-1e20": (raw_reply({"content": "hi"}, {"prompt_tokens": 10**20, "completion_tokens": 1,
                                                 "total_tokens": 10**20 + 1}), "out of range"),
    "content-5MiB": (raw_reply({"content": "x" * (5 * MIB)}), "--max-model-reply-bytes"),
    "tool_calls-a-string": (raw_reply({"content": "", "tool_calls": "hook()"}), "tool_calls is str"),
    "tool_calls-junk-item": (raw_reply({"content": "", "tool_calls": [42]}), "tool_calls[0]"),
    "content-an-object": (raw_reply({"content": {"a": 1}}), "content is dict"),
}


@pytest.mark.parametrize("case", list(HOSTILE_MODEL_REPLIES))
def test_a_hostile_model_reply_is_a_turn_error_and_the_runtime_stays_readable(
        peer: Peer, model: ScriptedModelServer, case: str) -> None:
    reply, expected = HOSTILE_MODEL_REPLIES[case]
    model.push(reply)
    result = peer.turn()
    assert result.status == "error" and expected in result.text, result.text[:300]
    assert_readable(peer)
    assert peer.turn("again").status == "done"  # the handle takes the next wake
    peer.restart()
    assert_readable(peer)


def arguments_reply(arguments: str) -> Callable[[JSON], JSON]:
    """Calls ``hook`` with ``arguments`` once, then echoes the tool message."""
    def script(body: JSON) -> JSON:
        tools = [m for m in body["messages"] if m.get("role") == "tool"]
        if tools:
            return chat_response(content=str(tools[0]["content"]), usage=(1, 1, 2))
        call = tool_call("hook", {})
        call["function"]["arguments"] = arguments
        return chat_response(content="", tool_calls=[call], usage=(1, 1, 2))
    return script


@pytest.mark.parametrize("arguments", ["{not json", "[1, 2]", "[" * 100_000 + "]" * 100_000],
                         ids=["not-json", "not-an-object", "100000-levels"])
def test_invalid_arguments_are_fed_back_and_the_tool_never_runs(
        peer: Peer, model: ScriptedModelServer, arguments: str) -> None:
    model.script = arguments_reply(arguments)
    model.route("/hook", lambda req: Reply(body={"output": "ran"}))
    result = peer.turn()
    assert result.status == "done" and result.text.startswith("invalid JSON arguments for hook: "), result
    assert not [r for r in model.received if r.path == "/hook"]
    assert_readable(peer)


HOSTILE_WEBHOOK_REPLIES: dict[str, tuple[JSON, str]] = {
    "url-an-object": ({"output": "", "pending": {"id": "q", "kind": "approval", "prompt": "ok?",
                                                 "url": {"evil": True}}}, "pending.url is dict"),
    "expires_at-a-number": ({"output": "", "pending": {"id": "q", "kind": "approval", "prompt": "ok?",
                                                       "expires_at": 12345}}, "pending.expires_at is int"),
    "data-150-levels": ({"output": "", "pending": {"id": "q", "kind": "approval", "prompt": "ok?",
                                                   "data": deep(150)}}, "nested deeper than"),
    "prompt-9MiB": ({"output": "", "pending": {"id": "q", "kind": "approval", "prompt": "p" * (9 * MIB)}},
                    "pending.prompt is over"),
    "metadata-150-levels": ({"output": "fine", "metadata": deep(150)}, "metadata is nested deeper"),
}


def echo_tool_result(body: JSON) -> JSON:
    tools = [m for m in body["messages"] if m.get("role") == "tool"]
    if tools:
        return chat_response(content=str(tools[0]["content"])[:2000], usage=(1, 1, 2))
    return chat_response(content="", tool_calls=[tool_call("hook", {})], usage=(1, 1, 2))


@pytest.mark.parametrize("case", list(HOSTILE_WEBHOOK_REPLIES))
def test_a_hostile_webhook_reply_is_that_calls_error(peer: Peer, model: ScriptedModelServer,
                                                     case: str) -> None:
    body, expected = HOSTILE_WEBHOOK_REPLIES[case]
    model.script = echo_tool_result
    model.route("/hook", lambda req: Reply(body=body))
    result = peer.turn()
    assert result.status == "done" and 'tool "hook" returned an unusable result' in result.text, result
    assert expected in result.text, result.text
    assert_readable(peer)
    peer.restart()
    assert_readable(peer)


def test_a_too_long_tool_output_is_truncated_with_a_marker_the_model_reads(
        tmp_path: Path, model: ScriptedModelServer) -> None:
    peer = Peer(tmp_path / "data", model, "--max-tool-output-bytes", "1000")
    try:
        seen: list[str] = []

        def script(body: JSON) -> JSON:
            tools = [m for m in body["messages"] if m.get("role") == "tool"]
            if tools:
                seen.append(str(tools[0]["content"]))
                return chat_response(content="read it", usage=(1, 1, 2))
            return chat_response(content="", tool_calls=[tool_call("hook", {})], usage=(1, 1, 2))

        model.script = script
        model.route("/hook", lambda req: Reply(body={"output": "y" * 5000}))
        assert peer.turn().status == "done"
        assert seen[0].startswith("y" * 1000)
        assert seen[0].endswith("[output truncated: 5000 bytes, limit 1000]")
        info = peer.stub.Info(pb.InfoRequest(), timeout=10)
        assert info.limits["max_tool_output_bytes"] == 1000
        assert info.limits["max_model_reply_bytes"] == 1 * MIB
    finally:
        peer.close()


def poison(data_dir: Path, rid: str, handle: str) -> None:
    """Rewrite the handle's record the way a daemon without bounds stored a hostile reply."""
    key = pair_key(rid, handle)
    with lmdb.open(str(data_dir), max_dbs=16, map_size=1 << 30) as env:
        db = env.open_db(Table.HANDLES.encode())
        with env.begin(write=True, db=db) as txn:
            raw = txn.get(key)
            assert raw is not None
            record: Any = decode_value(Table.HANDLES, key, bytes(raw))
            record["usage"] = {"prompt_tokens": 10**20, "completion_tokens": 1, "total_tokens": 10**20 + 1}
            record["turns_total"] = 10**20
            record["last_result"] = {"status": "done", "text": "z" * (20 * MIB), "is_error": False,
                                     "turns": 10**20, "total_tokens": 10**20}
            record["pending"] = {"id": "q", "kind": "approval", "prompt": "p",
                                 "url": {"evil": True}, "expires_at": 12345, "data": deep(150)}
            txn.put(key, encode_value(Table.HANDLES, key, record))


@pytest.mark.lmdb_only
def test_records_stored_before_the_bounds_are_read_back_clamped(peer: Peer) -> None:
    assert peer.turn().status == "done"
    peer.channel.close()
    assert peer.proc.stop() == 0
    poison(peer.data_dir, peer.rid, peer.handle)
    peer.proc = DaemonProcess(peer.data_dir).start()
    peer.channel, peer.stub = open_stub(peer.proc.target)
    snap = peer.stub.Snapshot(pb.SnapshotRequest(runtime_id=peer.rid, handle=peer.handle), timeout=10)
    assert snap.usage.prompt_tokens == snap.usage_total == 2**63 - 1  # clamped to what int64 carries
    assert len(snap.last_result.text.encode()) < 2 * MIB and "[output truncated" in snap.last_result.text
    assert snap.pending.url == json.dumps({"evil": True}) and snap.pending.expires_at == "12345"
    assert "unreadable" in snap.pending.data
    assert_readable(peer)
