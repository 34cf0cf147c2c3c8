"""``runtimes`` and ``pending``: the daemon-wide lists as tables and JSON, filtered."""

from __future__ import annotations

import json

from toolnexus_devtools import ScriptedModelServer

from .conftest import FIXED_ID, Daemon, authed, run_cli, suspend


def test_runtimes_table_and_json_count_handles_by_state(daemon: Daemon, model: ScriptedModelServer) -> None:
    rid, _, _ = suspend(daemon, model)
    table = run_cli(*authed(daemon, "runtimes"))
    assert table.returncode == 0, table.stderr
    header, *rows = table.stdout.splitlines()
    assert header.split() == ["RUNTIME", "CREATED", "HANDLES", "PENDING", "KEYED"]
    [row] = [r for r in rows if r.startswith(rid)]
    assert "1 suspended" in row and " ago" in row
    listed = json.loads(run_cli(*authed(daemon, "runtimes", "--json")).stdout)
    [mine] = [r for r in listed if r["runtime_id"] == rid]
    assert (mine["handles"], mine["pending"], mine["keyed"]) == ({"suspended": 1}, 1, False)


def test_pending_lists_the_open_requests_oldest_first(daemon: Daemon, model: ScriptedModelServer) -> None:
    older, h1, r1 = suspend(daemon, model)
    newer, h2, r2 = suspend(daemon, model)
    out = run_cli(*authed(daemon, "pending"))
    assert out.returncode == 0, out.stderr
    header, *rows = out.stdout.splitlines()
    assert header.split()[:5] == ["REQUEST", "KIND", "RUNTIME", "HANDLE", "WAITING"]
    mine = [r for r in rows if older in r or newer in r]
    assert [r.split()[:4] for r in mine] == [[r1, "approval", older, h1], [r2, "approval", newer, h2]]
    assert all("approve?" in r and " ago" in r for r in mine)


def test_pending_filters_by_runtime_and_kind_json(daemon: Daemon, model: ScriptedModelServer) -> None:
    rid, handle, request_id = suspend(daemon, model)
    other, _, _ = suspend(daemon, model, fixed=True)
    one = json.loads(run_cli(*authed(daemon, "pending", "--runtime", rid, "--json")).stdout)
    assert [(i["request"]["id"], i["runtime_id"], i["handle"], i["top_handle"]) for i in one] == [
        (request_id, rid, handle, handle)]
    inputs = json.loads(run_cli(*authed(daemon, "pending", "--kind", "input", "--json")).stdout)
    assert {i["request"]["kind"] for i in inputs} == {"input"}
    assert other in {i["runtime_id"] for i in inputs} and FIXED_ID in {i["request"]["id"] for i in inputs}


def test_answered_requests_leave_the_list(daemon: Daemon, model: ScriptedModelServer) -> None:
    rid, _, request_id = suspend(daemon, model)
    assert run_cli(*authed(daemon, "answer", request_id, "--approve")).returncode == 0
    left = json.loads(run_cli(*authed(daemon, "pending", "--runtime", rid, "--json")).stdout)
    assert left == []


def test_a_keyed_runtime_is_listed_only_with_its_key(daemon: Daemon, model: ScriptedModelServer) -> None:
    rid, _, request_id = suspend(daemon, model, key="list-key")
    hidden = json.loads(run_cli(*authed(daemon, "runtimes", "--json")).stdout)
    shown = json.loads(run_cli(*authed(daemon, "runtimes", "--json", "--runtime-key", "list-key")).stdout)
    assert rid not in {r["runtime_id"] for r in hidden}
    [mine] = [r for r in shown if r["runtime_id"] == rid]
    assert mine["keyed"] is True
    table = run_cli(*authed(daemon, "pending", "--runtime-key", "list-key")).stdout
    assert request_id in table and request_id not in run_cli(*authed(daemon, "pending")).stdout
