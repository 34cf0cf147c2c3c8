"""Helpers for the inspector's tests: a daemon serving the inspector, a client logged in to it."""

from __future__ import annotations

import re
from pathlib import Path

import httpx

from tests.support.daemon import DaemonProcess
from tests.support.grpc_client import open_stub
from toolnexus_daemon.api._gen import runtime_pb2 as pb

TOKEN = "inspector-test-token-0123456789"


def inspector_daemon(tmp_path: Path, *, token: str | None = TOKEN, extra: tuple[str, ...] = ()) -> DaemonProcess:
    args: list[str] = ["--ui-listen", "127.0.0.1:0", *extra]
    if token is not None:
        token_file = tmp_path / "token"
        token_file.write_text(token)
        args += ["--token-file", str(token_file)]
    return DaemonProcess(tmp_path / "data", *args)


def ui_base(target: str, token: str | None = TOKEN) -> str:
    """The inspector's address, as Info.config shows it once bound."""
    channel, stub = open_stub(target)
    try:
        metadata = [("authorization", f"Bearer {token}")] if token else []
        bound = stub.Info(pb.InfoRequest(), metadata=metadata, timeout=5).config["ui-listen"]
    finally:
        channel.close()
    assert bound.startswith("127.0.0.1:"), bound
    return f"http://{bound}"


def login(base: str, token: str = TOKEN) -> httpx.Client:
    """A client holding a session cookie (and sending the inspector's Origin on every request)."""
    client = httpx.Client(base_url=base, headers={"Origin": base}, timeout=10)
    reply = client.post("/login", data={"token": token})
    assert reply.status_code == 303, reply.text
    return client


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, html[:2000]
    return found.group(1)
