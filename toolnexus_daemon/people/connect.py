"""Where the commands connect and as whom: the shared flags, the Python client's ``Daemon``
and one call wrapper.

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

from toolnexus_client import Daemon, Event, ToolnexusError

from .exitcodes import CliError, Exit, from_client_error

DEFAULT_TARGET = "127.0.0.1:50051"
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
    """The Python client's ``Daemon`` with the caller's token, runtime key and TLS; every failed
    call becomes a CliError."""

    def __init__(self, ns: argparse.Namespace, env: Mapping[str, str]) -> None:
        self.target: str = ns.target
        self.timeout: float = ns.timeout
        # "" rather than None: the token is the flag's or the environment the command was given,
        # never one the client would read from this process's environment itself
        self.daemon = Daemon(ns.target, token=_token(ns, env), runtime_key=ns.runtime_key or None,
                             credentials=_credentials(ns))

    def call(self, method: Callable[..., R], *args: Any, timeout: float | None = None, **kwargs: Any) -> R:
        """``method`` of ``daemon`` with the command's ``--timeout`` (or ``timeout``)."""
        try:
            return method(*args, timeout=timeout or self.timeout, **kwargs)
        except ToolnexusError as err:
            raise from_client_error(err, self.target) from err

    def events(self, runtime: str, after: int, types: list[str], handle: str,
               started: Callable[[Any], None] | None = None) -> Iterator[Event]:
        """A runtime's events after ``after``, not reopened here (the caller does, saying so); a
        failure other than our own cancel becomes a CliError. ``started`` receives the stream, so
        another thread can cancel it."""
        stream = self.daemon.watch(runtime, after, types, handle or None, reopen=False)
        if started is not None:
            started(stream)
        try:
            yield from stream
        except ToolnexusError as err:
            if err.status is not grpc.StatusCode.CANCELLED:
                raise from_client_error(err, self.target) from err
        finally:
            stream.cancel()

    def close(self) -> None:
        self.daemon.close()


def _token(ns: argparse.Namespace, env: Mapping[str, str]) -> str:
    return _read_token(ns.token_file) if ns.token_file else env.get("TOOLNEXUS_TOKEN", "").strip()


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


def _credentials(ns: argparse.Namespace) -> grpc.ChannelCredentials | None:
    if ns.tls_ca is None:
        return None
    return grpc.ssl_channel_credentials(_read(ns.tls_ca, "--tls-ca"),
                                        private_key=_read(ns.tls_key, "--tls-key"),
                                        certificate_chain=_read(ns.tls_cert, "--tls-cert"))
