"""``events``: a runtime's log as lines or JSON lines, from a seq, and followed live."""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import threading
from pathlib import Path

from tests.support.daemon import DaemonProcess
from tests.support.grpc_client import open_stub, openai_llm
from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_devtools import ScriptedModelServer

from .conftest import TOKEN, Daemon, authed, clean_env, closed_port, interruptible, run_cli, suspend


def test_events_prints_the_stored_log_in_seq_order(daemon: Daemon, model: ScriptedModelServer) -> None:
    rid, handle, request_id = suspend(daemon, model)
    out = run_cli(*authed(daemon, "events", rid))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert [int(line.split()[0]) for line in lines] == list(range(1, len(lines) + 1))
    assert lines[0].split()[2:4] == [handle, "spawned"]
    assert any(f'pending  approval {request_id}: "approve?"' in line for line in lines)


def test_events_json_after_n_gives_one_object_per_line(daemon: Daemon, model: ScriptedModelServer) -> None:
    rid, _, request_id = suspend(daemon, model)
    out = run_cli(*authed(daemon, "events", rid, "--json", "--after", "3"))
    assert out.returncode == 0, out.stderr
    events = [json.loads(line) for line in out.stdout.splitlines()]
    assert events[0]["seq"] == 4 and all(e["runtime_id"] == rid for e in events)
    [pending] = [e for e in events if e["type"] == "pending"]
    assert pending["pending"]["id"] == request_id


def test_events_of_an_unknown_runtime_exits_3(daemon: Daemon) -> None:
    out = run_cli(*authed(daemon, "events", "no-such-runtime"))
    assert out.returncode == 3 and "NOT_FOUND" in out.stderr


def test_events_follow_prints_a_new_event_until_stopped(daemon: Daemon, model: ScriptedModelServer) -> None:
    """--follow keeps the stream open: a post made after it started shows up, and Ctrl-C ends it (exit 0)."""
    new = pb.NewRequest(agents=[pb.AgentDef(name="a", does="d")], llm=openai_llm(model.url))
    rid = daemon.stub.New(new, metadata=daemon.md, timeout=10).runtime_id
    spawn = pb.SpawnRequest(runtime_id=rid, agent="a")
    handle = daemon.stub.Spawn(spawn, metadata=daemon.md, timeout=10).handle
    args = interruptible(*authed(daemon, "events", rid, "--follow"))
    # PYTHONFAULTHANDLER: a command that does not end is made to print where each of its threads is
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**clean_env(), "PYTHONFAULTHANDLER": "1"})
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in proc.stdout or ()], daemon=True).start()
    try:
        assert "spawned" in lines.get(timeout=30)  # the stored log came first: the stream is open
        item = pb.InboxItem(text="hello")
        setattr(item, "from", "test")
        daemon.stub.Post(pb.PostRequest(runtime_id=rid, handle=handle, item=item), metadata=daemon.md,
                         timeout=10)
        line = lines.get(timeout=30)
        assert line.split()[:4] == ["2", line.split()[1], handle, "post"], line
        assert proc.poll() is None  # still following
        proc.send_signal(signal.SIGINT)
        # on its way out the command waits, each bounded, about 12 s at the worst (the reader thread
        # 2 s, the client's loop 5 s for its tasks and 5 s for its thread): more than that is a hang
        assert _ended(proc, timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def _ended(proc: subprocess.Popen[str], timeout: float) -> int:
    """The command's exit code; if it has not ended within ``timeout``, a failure that shows where
    each of its threads was (SIGABRT makes the fault handler print them)."""
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)
        _, err = proc.communicate(timeout=10)
        raise AssertionError(f"still running {timeout} s after Ctrl-C; its threads:\n{err}") from None


def test_events_follow_goes_on_across_a_daemon_restart(tmp_path: Path, model: ScriptedModelServer) -> None:
    """A followed stream ended by a restart is opened again after the last seq: no gap, no repeat."""
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    proc = DaemonProcess(tmp_path / "data", "--token-file", str(token_file),
                         listen=(f"127.0.0.1:{closed_port()}",), env={"TOOLNEXUS_TOKEN": ""}).start()
    md = (("authorization", f"Bearer {TOKEN}"),)
    cli = None
    try:
        channel, stub = open_stub(proc.target)
        with channel:
            new = pb.NewRequest(agents=[pb.AgentDef(name="a", does="d")], llm=openai_llm(model.url))
            rid = stub.New(new, metadata=md, timeout=10).runtime_id
            handle = stub.Spawn(pb.SpawnRequest(runtime_id=rid, agent="a"), metadata=md, timeout=10).handle
        args = interruptible("events", rid, "--follow", "--target", proc.target,
                             "--token-file", str(token_file))
        cli = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=clean_env())
        lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: [lines.put(x) for x in cli.stdout or ()], daemon=True).start()
        assert lines.get(timeout=30).split()[0] == "1"
        proc.restart()
        channel, stub = open_stub(proc.target)
        with channel:
            item = pb.InboxItem(text="after the restart")
            stub.Post(pb.PostRequest(runtime_id=rid, handle=handle, item=item), metadata=md, timeout=10)
        line = lines.get(timeout=60)
        assert line.split()[0] == "2" and line.split()[2:4] == [handle, "post"], line
        assert lines.empty() and cli.poll() is None
        cli.send_signal(signal.SIGINT)
        assert cli.wait(timeout=15) == 0
        assert cli.stderr is not None and "watching again after seq 1" in cli.stderr.read()
    finally:
        if cli is not None and cli.poll() is None:
            cli.kill()
            cli.wait(10)
        proc.stop()
