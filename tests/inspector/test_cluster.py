"""The inspector in a cluster (docs/inspector.md): two real daemons on one real PostgreSQL
database. The daemon that does not own a runtime shows it from the shared store and sends an
answer given in its inspector to the owner as a Resume, with the runtime key the session holds."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.inspector.support import (
    TOKEN,
    answer_form,
    ask_agent,
    csrf_of,
    login,
    park,
    ui_base,
    wait_result,
)
from tests.support.daemon import DaemonProcess
from tests.support.grpc_client import open_stub
from tests.support.pg_fixtures import pg_dsn, pg_server
from toolnexus_devtools import ScriptedModelServer

__all__ = ["pg_dsn", "pg_server"]


@pytest.fixture
def nodes(pg_dsn: str, tmp_path: Path) -> Iterator[list[DaemonProcess]]:
    (tmp_path / "token").write_text(TOKEN)
    procs = [DaemonProcess(tmp_path / name, "--store", pg_dsn, "--advertise", "127.0.0.1:0",
                           "--node-id", name, "--lease-ms", "1500", "--ui-listen", "127.0.0.1:0",
                           "--token-file", str(tmp_path / "token"))
             for name in ("a", "b")]
    try:
        for proc in procs:
            proc.start()
        yield procs
    finally:
        for proc in procs:
            proc.stop()


def test_an_answer_given_on_another_daemon_reaches_the_owner(nodes: list[DaemonProcess]) -> None:
    owner, other = nodes
    with ScriptedModelServer() as model:
        channel, stub = open_stub(owner.target)
        try:
            parked = park(stub, model, ask_agent(model, prompt="deploy?", output="deployed"), key="k1")
            with login(ui_base(other.target)) as client:
                assert parked.runtime not in client.get("/").text  # keyed: not yet
                csrf = csrf_of(client.get("/").text)
                client.post("/keys", data={"csrf": csrf, "key": "k1", "back": "/"})
                page = client.get("/runtime", params={"id": parked.runtime})
                assert page.status_code == 200 and "Served by another daemon" in page.text
                fields = {**answer_form(page.text, parked.request), "decision": "approve"}
                reply = client.post("/answer", data=fields)
                assert reply.status_code == 303, reply.text
                assert wait_result(stub, parked, key="k1").text == "deployed"
                # the timeline there is the shared store's
                with client.stream("GET", "/events", params={"id": parked.runtime, "after": "0"},
                                   timeout=15) as events:
                    first = next(line for line in events.iter_lines() if line.startswith("id: "))
                assert first == "id: 1"
        finally:
            channel.close()
