"""``answer``: approve or decline an open request from a shell; the handle finishes."""

from __future__ import annotations

import json

from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_devtools import Reply, ScriptedModelServer

from .conftest import FIXED_ID, FIXED_PATH, Daemon, authed, run_cli, snapshot, suspend


def _answers_seen(model: ScriptedModelServer) -> list[dict[str, object]]:
    """The answers the fixed-id webhook tool was called with."""
    bodies = [r.json() or {} for r in model.received if r.path == FIXED_PATH]
    return [b["answer"] for b in bodies if b.get("answer")]


def test_approve_with_runtime_finishes_the_handle(daemon: Daemon, model: ScriptedModelServer) -> None:
    rid, handle, request_id = suspend(daemon, model)
    out = run_cli(*authed(daemon, "answer", request_id, "--approve", "--runtime", rid))
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [f"approved {request_id} in runtime {rid}",
                                       f'{handle}: done "action performed"']
    snap = snapshot(daemon, rid, handle)
    assert (snap.state, snap.last_result.text) == ("idle", "action performed")


def test_decline_with_a_reason_finishes_the_handle_declined(daemon: Daemon,
                                                            model: ScriptedModelServer) -> None:
    """A declined request is not run again: the model reads ``declined/expired: <prompt>`` and finishes."""
    rid, handle, request_id = suspend(daemon, model)
    out = run_cli(*authed(daemon, "answer", request_id, "--decline", "--reason", "too risky",
                          "--runtime", rid, "--json"))
    assert out.returncode == 0, out.stderr
    reply = json.loads(out.stdout)
    assert (reply["runtime_id"], reply["handle"], reply["duplicate"]) == (rid, handle, False)
    assert (reply["result"]["status"], reply["result"]["text"]) == ("done", "declined/expired: approve?")
    assert snapshot(daemon, rid, handle).state == "idle"


def test_approve_hands_data_and_reason_to_the_tool(daemon: Daemon, model: ScriptedModelServer) -> None:
    rid, handle, request_id = suspend(daemon, model, fixed=True)
    assert request_id == FIXED_ID
    out = run_cli(*authed(daemon, "answer", request_id, "--approve", "--reason", "checked by ops",
                          "--data", '{"choice": "b", "n": 2}', "--runtime", rid))
    assert out.returncode == 0, out.stderr
    [seen] = _answers_seen(model)
    assert (seen["id"], seen["ok"], seen["reason"], seen["data"]) == (
        FIXED_ID, True, "checked by ops", {"choice": "b", "n": 2})
    assert snapshot(daemon, rid, handle).last_result.text == "chose"


def test_an_answered_request_exits_3_with_and_without_runtime(daemon: Daemon,
                                                              model: ScriptedModelServer) -> None:
    """An answered request is no longer open: exit 3 (not found) whichever way it is named, the
    message saying what the daemon knows (the same answer changed nothing, another is refused)."""
    rid, handle, request_id = suspend(daemon, model)
    first = run_cli(*authed(daemon, "answer", request_id, "--approve", "--runtime", rid))
    assert first.returncode == 0, first.stderr
    same = run_cli(*authed(daemon, "answer", request_id, "--approve", "--runtime", rid))
    other = run_cli(*authed(daemon, "answer", request_id, "--decline", "--runtime", rid))
    found = run_cli(*authed(daemon, "answer", request_id, "--approve"))
    as_json = run_cli(*authed(daemon, "answer", request_id, "--approve", "--runtime", rid, "--json"))
    assert (same.returncode, other.returncode, found.returncode, as_json.returncode) == (3, 3, 3, 3)
    assert "already answered so; nothing changed" in same.stderr and same.stdout == ""
    assert "a different answer cannot replace it" in other.stderr and "no longer open" in other.stderr
    assert f"no open request {request_id!r}" in found.stderr
    assert json.loads(as_json.stdout)["duplicate"] is True
    assert snapshot(daemon, rid, handle).last_result.text == "action performed"


def test_unknown_request_in_a_runtime_exits_3(daemon: Daemon, model: ScriptedModelServer) -> None:
    rid, _, _ = suspend(daemon, model)
    out = run_cli(*authed(daemon, "answer", "no-such-request", "--approve", "--runtime", rid))
    assert out.returncode == 3
    assert "NOT_FOUND" in out.stderr and out.stdout == ""


def test_bad_data_is_a_usage_error_naming_the_problem(daemon: Daemon, model: ScriptedModelServer) -> None:
    rid, handle, request_id = suspend(daemon, model)
    base = ("answer", request_id, "--approve", "--runtime", rid, "--data")
    not_json = run_cli(*authed(daemon, *base, "{oops"))
    not_object = run_cli(*authed(daemon, *base, "[1]"))
    assert (not_json.returncode, not_object.returncode) == (2, 2)
    assert "--data is not valid JSON" in not_json.stderr and "line 1 column 2" in not_json.stderr
    assert "--data must be a JSON object" in not_object.stderr and "list" in not_object.stderr
    assert snapshot(daemon, rid, handle).state == "suspended"  # nothing was sent


def test_approve_and_decline_together_is_a_usage_error(daemon: Daemon) -> None:
    out = run_cli(*authed(daemon, "answer", "x", "--approve", "--decline"))
    assert out.returncode == 2 and "not allowed with argument" in out.stderr
    neither = run_cli(*authed(daemon, "answer", "x"))
    assert neither.returncode == 2 and "--approve" in neither.stderr


def test_answer_finds_the_runtime_itself(daemon: Daemon, model: ScriptedModelServer) -> None:
    rid, handle, request_id = suspend(daemon, model)
    out = run_cli(*authed(daemon, "answer", request_id, "--approve"))
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"approved {request_id} in runtime {rid}")
    assert snapshot(daemon, rid, handle).last_result.text == "action performed"


def test_answer_of_an_unknown_request_exits_3(daemon: Daemon) -> None:
    out = run_cli(*authed(daemon, "answer", "never-asked", "--approve"))
    assert out.returncode == 3
    assert "no open request 'never-asked'" in out.stderr


def test_answer_of_an_id_open_in_two_runtimes_is_ambiguous(daemon: Daemon,
                                                           model: ScriptedModelServer) -> None:
    first, h1, rq = suspend(daemon, model, fixed=True)
    second, h2, _ = suspend(daemon, model, fixed=True)
    out = run_cli(*authed(daemon, "answer", rq, "--approve"))
    assert out.returncode == 7
    assert first in out.stderr and second in out.stderr and "--runtime" in out.stderr
    assert snapshot(daemon, first, h1).state == snapshot(daemon, second, h2).state == "suspended"
    chosen = run_cli(*authed(daemon, "answer", rq, "--approve", "--runtime", second))
    assert chosen.returncode == 0, chosen.stderr
    assert snapshot(daemon, second, h2).state == "idle"


def test_an_answer_outlasting_the_timeout_says_it_may_have_been_accepted(
        daemon: Daemon, model: ScriptedModelServer) -> None:
    """Resume waits for the agent: past --timeout the command exits 4 but says the answer may stand."""
    model.route(FIXED_PATH, lambda r: Reply(body={"output": "slow", "is_error": False}, delay=3.0)
                if (r.json() or {}).get("answer") else
                {"output": "", "is_error": False,
                 "pending": {"id": FIXED_ID, "kind": "input", "prompt": "?"}})
    rid, handle, request_id = suspend(daemon, model, fixed=True)
    out = run_cli(*authed(daemon, "answer", request_id, "--approve", "--runtime", rid, "--timeout", "1"))
    assert out.returncode == 4
    assert "DEADLINE_EXCEEDED" in out.stderr and "may have been accepted" in out.stderr
    wait = pb.WaitRequest(runtime_id=rid, handle=handle, timeout_ms=20_000)
    done = daemon.stub.Wait(wait, metadata=daemon.md, timeout=30)
    assert (done.status, done.text) == ("done", "slow")
