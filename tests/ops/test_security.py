"""Listening safely: loopback unless TLS or --insecure, TLS and mTLS, bearer tokens, per-runtime keys."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grpc
import pytest
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase

from tests.ops.certs import Certs, Pair
from tests.ops.conftest import run_serve
from tests.support.daemon import DaemonProcess
from tests.support.grpc_client import code_of, native_agent, open_stub, openai_llm
from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_daemon.api._gen import runtime_pb2_grpc as pb_grpc
from toolnexus_daemon.config import is_loopback, load

TOKEN = "tok-7f3a9c-for-ops-tests"
SERVICE = "toolnexus.agents.v1.AgentRuntime"


def test_loopback_addresses_are_told_apart_from_the_rest() -> None:
    for address in ("127.0.0.1:1", "127.8.9.1:1", "[::1]:1", "localhost:1", "unix:/tmp/x.sock"):
        assert is_loopback(address), address
    for address in ("0.0.0.0:1", "[::]:1", "10.1.2.3:1", "example.internal:1"):
        assert not is_loopback(address), address


def test_a_non_loopback_address_without_tls_is_refused_before_binding(tmp_path: Path) -> None:
    """The daemon exits 2 naming the way out; it never listens on 0.0.0.0 by accident."""
    proc = run_serve(tmp_path / "data", "--listen", "0.0.0.0:0")
    assert proc.returncode == 2
    assert "--listen 0.0.0.0:0: a non-loopback address needs TLS" in proc.stderr
    assert "--insecure" in proc.stderr


def test_insecure_or_tls_make_a_non_loopback_address_acceptable(certs: Certs) -> None:
    """Checked on the settings alone: these tests never bind beyond 127.0.0.1."""
    assert load(["--listen", "0.0.0.0:50051", "--insecure"], {}).insecure
    tls = ["--tls-cert", str(certs.server.cert), "--tls-key", str(certs.server.key)]
    settings = load(["--listen", "0.0.0.0:50051", *tls], {})
    assert settings.tls is not None and settings.tls.client_ca is None
    with pytest.raises(SystemExit):
        load(["--tls-cert", str(certs.server.cert)], {})  # a certificate without its key


def test_a_tls_file_that_is_not_pem_fails_the_start_naming_the_flag(tmp_path: Path, certs: Certs) -> None:
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate")
    proc = run_serve(tmp_path / "data", "--listen", "127.0.0.1:0", "--tls-cert", str(junk),
                     "--tls-key", str(certs.server.key))
    assert proc.returncode == 2
    assert "--tls-cert" in proc.stderr and "not a PEM file" in proc.stderr


def _tls_channel(target: str, ca: Path, client: Pair | None = None) -> grpc.Channel:
    key, cert = (client.key.read_bytes(), client.cert.read_bytes()) if client else (None, None)
    creds = grpc.ssl_channel_credentials(ca.read_bytes(), private_key=key, certificate_chain=cert)
    return grpc.secure_channel(target, creds)


def _info_code(channel: grpc.Channel) -> grpc.StatusCode:
    try:
        pb_grpc.AgentRuntimeStub(channel).Info(pb.InfoRequest(), timeout=5)
    except grpc.RpcError as err:
        return err.code()
    return grpc.StatusCode.OK


def test_tls_serves_tls_clients_only(tmp_path: Path, certs: Certs) -> None:
    proc = DaemonProcess(tmp_path / "data", "--tls-cert", str(certs.server.cert),
                         "--tls-key", str(certs.server.key))
    with proc:
        with _tls_channel(proc.target, certs.ca) as channel:
            info = pb_grpc.AgentRuntimeStub(channel).Info(pb.InfoRequest(), timeout=5)
        assert info.config["tls-cert"] == str(certs.server.cert)
        assert certs.server.key.read_text() not in str(info)
        with grpc.insecure_channel(proc.target) as plain:
            assert _info_code(plain) is grpc.StatusCode.UNAVAILABLE


def test_mtls_refuses_clients_without_a_certificate_from_the_ca(tmp_path: Path, certs: Certs) -> None:
    """No client certificate, or one from another CA: refused. The unix socket stays plaintext."""
    sock = Path("/tmp") / f"tnd-mtls-{tmp_path.name[-12:]}.sock"
    proc = DaemonProcess(tmp_path / "data", "--tls-cert", str(certs.server.cert),
                         "--tls-key", str(certs.server.key), "--tls-client-ca", str(certs.ca),
                         listen=("127.0.0.1:0", f"unix:{sock}"))
    with proc:
        with _tls_channel(proc.target, certs.ca) as channel:
            assert _info_code(channel) is grpc.StatusCode.UNAVAILABLE
        with _tls_channel(proc.target, certs.ca, certs.stranger) as channel:
            assert _info_code(channel) is grpc.StatusCode.UNAVAILABLE
        with _tls_channel(proc.target, certs.ca, certs.client) as channel:
            assert _info_code(channel) is grpc.StatusCode.OK
        with grpc.insecure_channel(f"unix:{sock}") as channel:
            assert _info_code(channel) is grpc.StatusCode.OK
        probe = [sys.executable, "-m", "toolnexus_daemon", "health", "--target", proc.target,
                 "--tls-ca", str(certs.ca), "--tls-cert", str(certs.client.cert),
                 "--tls-key", str(certs.client.key)]
        done = subprocess.run(probe, capture_output=True, text=True, timeout=30)
        assert (done.returncode, done.stdout.strip()) == (0, "SERVING"), done.stderr


def test_token_from_the_environment_guards_calls_and_reflection_unless_opened(tmp_path: Path) -> None:
    """TOOLNEXUS_TOKEN: calls need it; --reflection-open lets reflection through without it."""
    proc = DaemonProcess(tmp_path / "data", "--reflection-open", env={"TOOLNEXUS_TOKEN": TOKEN})
    with proc:
        channel, stub = open_stub(proc.target)
        with channel:
            code, _ = code_of(lambda: stub.Info(pb.InfoRequest(), timeout=5))
            assert code is grpc.StatusCode.UNAUTHENTICATED
            assert SERVICE in ProtoReflectionDescriptorDatabase(channel).get_services()
            info = stub.Info(pb.InfoRequest(), metadata=(("authorization", f"Bearer {TOKEN}"),), timeout=5)
            assert info.config["auth-token"] == "<redacted>"
    assert TOKEN not in proc.logs()


def test_token_file_guards_reflection_too(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    with DaemonProcess(tmp_path / "data", "--token-file", str(token_file)) as proc:
        channel, _ = open_stub(proc.target)
        with channel, pytest.raises(grpc.RpcError) as err:
            ProtoReflectionDescriptorDatabase(channel).get_services()
        assert err.value.code() is grpc.StatusCode.UNAUTHENTICATED


def test_one_runtime_key_does_not_open_another_runtime(tmp_path: Path) -> None:
    """Two apps on one sidecar: each key opens its own runtime only, Resume and Watch included."""
    with DaemonProcess(tmp_path / "data") as proc:
        channel, stub = open_stub(proc.target)
        with channel:
            llm = openai_llm("http://127.0.0.1:9/v1")
            a = stub.New(pb.NewRequest(agents=[native_agent("a", "t")], llm=llm, runtime_key="key-a"),
                         timeout=5).runtime_id
            b = stub.New(pb.NewRequest(agents=[native_agent("b", "t")], llm=llm, runtime_key="key-b"),
                         timeout=5).runtime_id
            key_a = (("x-toolnexus-runtime-key", "key-a"),)
            resume = pb.ResumeRequest(runtime_id=b, answer=pb.Answer(id="anything", ok=True))
            code, details = code_of(lambda: stub.Resume(resume, metadata=key_a, timeout=5))
            assert code is grpc.StatusCode.PERMISSION_DENIED and b in details
            watch = pb.WatchRequest(runtime_id=b)
            code, _ = code_of(lambda: list(stub.Watch(watch, metadata=key_a, timeout=5)))
            assert code is grpc.StatusCode.PERMISSION_DENIED
            listed = stub.List(pb.ListRequest(runtime_id=a), metadata=key_a, timeout=5)
            assert list(listed.handles) == []
