"""``inspect``: the handle tree of a real runtime, as a tree for people and as JSON for scripts."""

from __future__ import annotations

import json

from toolnexus_devtools import ScriptedModelServer

from .conftest import Daemon, authed, run_cli, suspend


def test_inspect_draws_the_tree_with_state_usage_and_the_request_waited_on(
        daemon: Daemon, model: ScriptedModelServer) -> None:
    rid, handle, request_id = suspend(daemon, model)
    out = run_cli(*authed(daemon, "inspect", rid))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == f"runtime {rid}"
    assert lines[1] == f"└── {handle}  approver  suspended  5 tokens, 1 turn"
    assert lines[2] == f'        waits on approval {request_id}: "approve?"'
    assert max(len(line) for line in lines) <= 100


def test_inspect_json_gives_every_snapshot_field(daemon: Daemon, model: ScriptedModelServer) -> None:
    rid, handle, request_id = suspend(daemon, model)
    out = run_cli(*authed(daemon, "inspect", rid, handle, "--json"))
    assert out.returncode == 0, out.stderr
    [snap] = json.loads(out.stdout)
    assert (snap["id"], snap["state"], snap["pending"]["id"]) == (handle, "suspended", request_id)
    assert snap["usage_total"] == 5 and isinstance(snap["usage"]["total_tokens"], int)
    assert snap["last_result"]["status"] == "pending"


def test_inspect_a_handle_draws_its_subtree_only(daemon: Daemon, model: ScriptedModelServer) -> None:
    rid, handle, _ = suspend(daemon, model)
    out = run_cli(*authed(daemon, "inspect", rid, handle))
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0].startswith(f"{handle}  approver  suspended")


def test_inspect_unknown_runtime_or_handle_exits_3(daemon: Daemon, model: ScriptedModelServer) -> None:
    rid, _, _ = suspend(daemon, model)
    missing_handle = run_cli(*authed(daemon, "inspect", rid, "root/nobody.9"))
    missing_runtime = run_cli(*authed(daemon, "inspect", "no-such-runtime"))
    assert (missing_handle.returncode, missing_runtime.returncode) == (3, 3)
    assert "NOT_FOUND" in missing_handle.stderr and missing_handle.stdout == ""


def test_inspect_over_a_unix_socket(daemon: Daemon, model: ScriptedModelServer) -> None:
    rid, handle, _ = suspend(daemon, model)
    out = run_cli("inspect", rid, "--target", daemon.socket, "--token-file", str(daemon.token_file))
    assert out.returncode == 0, out.stderr
    assert handle in out.stdout
