"""Where the commands connect and as whom: the shared flags, the channel and one call wrapper.

Target and token are found as the clients find them (docs/protocol.md §10):
``--target`` else ``$TOOLNEXUS_TARGET`` else 127.0.0.1:50051 (``unix:/path``
works too), ``--token-file`` else ``$TOOLNEXUS_TOKEN``; ``--runtime-key`` (else
``$TOOLNEXUS_RUNTIME_KEY``) opens runtimes created with a key.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

import grpc

from ..api._gen import runtime_pb2_grpc as pb_grpc
from .exitcodes import CliError, Exit, from_rpc_error

DEFAULT_TARGET = "127.0.0.1:50051"
RUNTIME_KEY_HEADER = "x-toolnexus-runtime-key"
R = TypeVar("R")


def add_connection_flags(p: argparse.ArgumentParser, env: Mapping[str, str]) -> None:
    g = p.add_argument_group("connection")
    g.add_argument("--target", default=env.get("TOOLNEXUS_TARGET") or DEFAULT_TARGET, metavar="ADDR",
                   help="host:port or unix:/path (env TOOLNEXUS_TARGET; default %(default)s)")
    g.add_argument("--token-file", type=Path, default=None, metavar="PATH",
                   help="file holding the daemon's bearer token (default: env TOOLNEXUS_TOKEN)")
    g.add_argument("--runtime-key", default=env.get("TOOLNEXUS_RUNTIME_KEY", "").strip(), metavar="KEY",
                   help="the key of a runtime created with one (env TOOLNEXUS_RUNTIME_KEY); the daemon "
                        "takes one key per call: holding several, run the command once with each")
    g.add_argument("--tls-ca", type=Path, default=None, metavar="PEM", help="dial with TLS, trusting this CA")
    g.add_argument("--tls-cert", type=Path, default=None, metavar="PEM", help="client certificate (mTLS)")
    g.add_argument("--tls-key", type=Path, default=None, metavar="PEM", help="client key (mTLS)")
    g.add_argument("--timeout", type=float, default=30.0, metavar="S",
                   help="seconds each call may take (default %(default)s)")
    p.add_argument("--json", action="store_true", help="print JSON for scripts instead of a table")


class Connection:
    """A channel to the daemon with the caller's metadata; every failed call becomes a CliError."""

    def __init__(self, ns: argparse.Namespace, env: Mapping[str, str]) -> None:
        self.target: str = ns.target
        self.timeout: float = ns.timeout
        self.metadata = _metadata(ns, env)
        self.channel = _channel(ns)
        self.stub = pb_grpc.AgentRuntimeStub(self.channel)

    def call(self, method: Callable[..., R], request: Any, timeout: float | None = None) -> R:
        try:
            return method(request, metadata=self.metadata, timeout=timeout or self.timeout)
        except grpc.RpcError as err:
            raise from_rpc_error(err, self.target) from err

    def stream(self, method: Callable[..., Any], request: Any,
               started: Callable[[Any], None] | None = None) -> Iterator[Any]:
        """A server stream's messages; its failure (other than our own cancel) becomes a CliError.
        ``started`` receives the call, so another thread can cancel it."""
        call = method(request, metadata=self.metadata)
        if started is not None:
            started(call)
        try:
            yield from call
        except grpc.RpcError as err:
            if err.code() is not grpc.StatusCode.CANCELLED:
                raise from_rpc_error(err, self.target) from err
        finally:
            call.cancel()

    def close(self) -> None:
        self.channel.close()


def _metadata(ns: argparse.Namespace, env: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    token = _read_token(ns.token_file) if ns.token_file else env.get("TOOLNEXUS_TOKEN", "").strip()
    pairs = [("authorization", f"Bearer {token}")] if token else []
    return tuple(pairs + ([(RUNTIME_KEY_HEADER, ns.runtime_key)] if ns.runtime_key else []))


def _read_token(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise CliError(Exit.USAGE, f"--token-file {path}: {exc.strerror or exc}") from exc


def _read(path: Path | None, flag: str) -> bytes | None:
    if path is None:
        return None
    try:
        return path.read_bytes()
    except OSError as exc:
        raise CliError(Exit.USAGE, f"{flag} {path}: {exc.strerror or exc}") from exc


def _channel(ns: argparse.Namespace) -> grpc.Channel:
    if ns.tls_ca is None:
        return grpc.insecure_channel(ns.target)
    creds = grpc.ssl_channel_credentials(_read(ns.tls_ca, "--tls-ca"),
                                         private_key=_read(ns.tls_key, "--tls-key"),
                                         certificate_chain=_read(ns.tls_cert, "--tls-cert"))
    return grpc.secure_channel(ns.target, creds)
