"""``versions``: a runtime's registry versions as a table and JSON, and ``resume --upgrade``."""

from __future__ import annotations

import json

from tests.support.grpc_client import approval_agent, openai_llm
from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_devtools import ScriptedModelServer

from .conftest import Daemon, authed, run_cli, snapshot, suspend


def _redeploy(d: Daemon, model: ScriptedModelServer, rid: str, soul: str) -> int:
    agent = approval_agent("approver", model.approval_url)
    agent.soul = soul
    new = pb.NewRequest(runtime_id=rid, agents=[agent], llm=openai_llm(model.url))
    return int(d.stub.New(new, metadata=d.md, timeout=10).version.number)


def test_versions_lists_each_version_with_its_handles_table_and_json(
        daemon: Daemon, model: ScriptedModelServer) -> None:
    rid, handle, request_id = suspend(daemon, model)
    assert _redeploy(daemon, model, rid, "\x1b[31mredeployed\x07") == 2
    table = run_cli(*authed(daemon, "versions", rid))
    assert table.returncode == 0, table.stderr
    header, *rows = table.stdout.splitlines()
    assert header.split() == ["VERSION", "LATEST", "HANDLES", "CREATED", "DIGEST"]
    old, latest = rows
    assert old.split()[:2] == ["1", "1"] and latest.split()[:3] == ["2", "yes", "0"], table.stdout
    assert all(r.split()[-1] != "" and " ago" in r for r in rows)
    listed = json.loads(run_cli(*authed(daemon, "versions", rid, "--json")).stdout)
    assert [(v["version"]["number"], v.get("handles", 0), v.get("latest", False)) for v in listed] == [
        (1, 1, False), (2, 0, True)]
    assert all(len(v["version"]["digest"]) == 64 for v in listed)
    upgraded = run_cli(*authed(daemon, "resume", rid, request_id, "--approve", "--upgrade"))
    assert upgraded.returncode == 0, upgraded.stderr
    assert snapshot(daemon, rid, handle).version == 2


def test_versions_of_an_unknown_runtime_exits_3(daemon: Daemon) -> None:
    out = run_cli(*authed(daemon, "versions", "no-such-runtime"))
    assert out.returncode == 3 and "no-such-runtime" in out.stderr
