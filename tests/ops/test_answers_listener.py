"""The answer-link listener's flags and TLS (docs/operations.md): loopback unless said otherwise,
no plaintext links off this machine unless ``--insecure``, the daemon's certificate reused."""

from __future__ import annotations

import socket
from pathlib import Path

import grpc
import httpx
import pytest

from tests.support.answer_links import park
from tests.support.daemon import DaemonProcess
from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_daemon.api._gen import runtime_pb2_grpc as pb_grpc
from toolnexus_daemon.config import load
from toolnexus_devtools import ScriptedModelServer

from .certs import Certs


def _refused(argv: list[str], env: dict[str, str] | None = None) -> None:
    with pytest.raises(SystemExit) as err:
        load(argv, env or {})
    assert err.value.code == 2


def test_a_bare_port_means_loopback_and_the_environment_is_read() -> None:
    answers = load(["--answers-listen", "8443"], {}).answers
    assert answers is not None and (answers.listen, answers.base_url) == ("127.0.0.1:8443", "")
    env = {"TOOLNEXUS_ANSWERS_LISTEN": ":0", "TOOLNEXUS_ANSWERS_BASE_URL": "https://a.example/x/"}
    answers = load([], env).answers
    assert answers is not None and (answers.listen, answers.base_url) == ("127.0.0.1:0", "https://a.example/x")
    assert load([], {}).answers is None
    assert load(["--answers-listen", "0"], {}).redacted()["answers-listen"] == "127.0.0.1:0"


def test_unsafe_or_malformed_answer_settings_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    _refused(["--answers-listen", "192.0.2.7:8443"])
    assert "needs TLS" in capsys.readouterr().err
    _refused(["--answers-listen", "0.0.0.0:8443", "--insecure"])
    assert "--answers-base-url" in capsys.readouterr().err
    _refused(["--answers-base-url", "https://a.example"])
    _refused(["--answers-listen", "0", "--answers-base-url", "ftp://a.example"])
    _refused(["--answers-listen", "0", "--answers-base-url", "https://a.example/?q=1"])
    _refused(["--answers-listen", "host:port"])
    argv = ["--answers-listen", "0.0.0.0:8443", "--insecure", "--answers-base-url", "http://a.example"]
    settings = load(argv, {})
    assert settings.answers is not None and settings.answers.base_url == "http://a.example"


def test_a_daemon_with_tls_serves_its_links_over_https(tmp_path: Path, certs: Certs,
                                                      model: ScriptedModelServer) -> None:
    proc = DaemonProcess(tmp_path / "data", "--tls-cert", str(certs.server.cert), "--tls-key",
                         str(certs.server.key), "--answers-listen", "127.0.0.1:0")
    with proc:
        creds = grpc.ssl_channel_credentials(certs.ca.read_bytes())
        with grpc.secure_channel(proc.target, creds) as channel:
            stub = pb_grpc.AgentRuntimeStub(channel)
            base = stub.Info(pb.InfoRequest(), timeout=5).config["answers-base-url"]
            assert base.startswith("https://127.0.0.1:")
            parked = park(stub, model)
            assert parked.pending.answer_url.startswith(base + "/a/")
            with httpx.Client(verify=str(certs.ca), timeout=15) as http:
                assert http.post(parked.pending.answer_url, json={"ok": True}).status_code == 200
            with httpx.Client(timeout=5) as plain, pytest.raises(httpx.HTTPError):
                plain.get(parked.pending.answer_url.replace("https://", "http://"))
            wait = pb.WaitRequest(runtime_id=parked.runtime, handle=parked.handle, timeout_ms=10_000)
            done = stub.Wait(wait, timeout=15)
            assert done.status == "done"


def test_a_taken_answers_port_exits_2(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = DaemonProcess(tmp_path / "data", "--answers-listen", f"127.0.0.1:{port}")
        with pytest.raises(RuntimeError, match="cannot serve answer links"):
            proc.start(timeout=15)
        assert proc.stop() == 2
