"""``toolnexus-daemon health``: a grpc.health.v1 check for exec probes and Docker HEALTHCHECK.

Kubernetes' built-in gRPC probe dials the pod IP over TCP without TLS, which
cannot reach a daemon listening only on a unix socket or on loopback (its
defaults). This command runs inside the container, dials the daemon's own
address (unix socket, loopback, TLS or mTLS) and exits 0 only when the daemon
reports SERVING, so readiness is the daemon's own health answer.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2

from ..config import DEFAULT_LISTEN

CHECK = "/grpc.health.v1.Health/Check"


def probe_parser(env: Mapping[str, str]) -> argparse.ArgumentParser:
    first_listen = next((a for a in env.get("TOOLNEXUS_LISTEN", "").split(",") if a.strip()), DEFAULT_LISTEN)
    p = argparse.ArgumentParser(prog="toolnexus-daemon health",
                                description="Exit 0 if grpc.health.v1 says SERVING, else 1.")
    p.add_argument("--target", default=env.get("TOOLNEXUS_HEALTH_TARGET", first_listen), metavar="ADDR",
                   help="host:port or unix:/path (env TOOLNEXUS_HEALTH_TARGET; default the first "
                        "TOOLNEXUS_LISTEN address, else %(default)s)")
    p.add_argument("--service", default="", help="service name to check (default: the whole daemon)")
    p.add_argument("--timeout", type=float, default=3.0, help="seconds (default %(default)s)")
    p.add_argument("--tls-ca", type=Path, default=env.get("TOOLNEXUS_HEALTH_TLS_CA") or None, metavar="PEM",
                   help="dial with TLS, trusting this CA (env TOOLNEXUS_HEALTH_TLS_CA)")
    p.add_argument("--tls-cert", type=Path, default=None, metavar="PEM", help="client certificate (mTLS)")
    p.add_argument("--tls-key", type=Path, default=None, metavar="PEM", help="client key (mTLS)")
    return p


@dataclass(frozen=True)
class _Probe:
    """The parsed command line, typed (argparse's namespace is not)."""

    target: str
    service: str
    timeout: float
    tls_ca: Path | None
    tls_cert: Path | None
    tls_key: Path | None


def _probe(argv: Sequence[str], env: Mapping[str, str]) -> _Probe:
    ns = probe_parser(env).parse_args(list(argv))
    target: str = ns.target
    service: str = ns.service
    timeout: float = ns.timeout
    tls_ca: Path | None = ns.tls_ca
    tls_cert: Path | None = ns.tls_cert
    tls_key: Path | None = ns.tls_key
    return _Probe(target, service, timeout, tls_ca, tls_cert, tls_key)


def main(argv: Sequence[str], env: Mapping[str, str]) -> int:
    ns = _probe(argv, env)
    try:
        with _channel(ns) as channel:
            reply = _check(channel)(health_pb2.HealthCheckRequest(service=ns.service), timeout=ns.timeout)
    except grpc.RpcError as err:
        print(f"toolnexus-daemon health: {ns.target}: {err.code().name}: {err.details()}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"toolnexus-daemon health: {exc}", file=sys.stderr)
        return 1
    status = health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
    print(status)
    return 0 if reply.status == health_pb2.HealthCheckResponse.SERVING else 1


def _check(channel: grpc.Channel) -> grpc.UnaryUnaryMultiCallable[health_pb2.HealthCheckRequest,
                                                                  health_pb2.HealthCheckResponse]:
    """``Health.Check`` on ``channel``: what ``HealthStub`` builds, spelled out because the stub's
    type stubs declare none of its methods."""
    return channel.unary_unary(CHECK, request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
                               response_deserializer=health_pb2.HealthCheckResponse.FromString)


def _channel(ns: _Probe) -> grpc.Channel:
    if ns.tls_ca is None:
        return grpc.insecure_channel(ns.target)
    key = ns.tls_key.read_bytes() if ns.tls_key else None
    cert = ns.tls_cert.read_bytes() if ns.tls_cert else None
    creds = grpc.ssl_channel_credentials(ns.tls_ca.read_bytes(), private_key=key, certificate_chain=cert)
    return grpc.secure_channel(ns.target, creds)
