"""The gRPC server: listeners, message limits, health and reflection around the servicer.

``create_server`` binds every ``--listen`` address before returning, so a bad
or busy address fails the start with a clear message, and port 0 comes back
resolved (tests bind port 0). ``unix:`` sockets are created owner-only (mode
0600) and a stale socket file left by a crashed daemon is removed first; a
socket another process still serves is never taken over. With ``--tls-cert``
every TCP listener speaks TLS (mTLS with ``--tls-client-ca``); unix sockets
stay plaintext, guarded by their file mode, which is what a sidecar sharing a
socket volume with its app wants. Requests are decoded by ``decode.guarded``
so a malformed one is INVALID_ARGUMENT, never UNKNOWN.
"""

from __future__ import annotations

import os
import socket
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import grpc
from grpc import aio
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer
from grpc_reflection.v1alpha import reflection

from ..config import Settings
from ..engine.verbs.engine import Engine
from ..relay import WorkerHub
from ._gen import runtime_pb2 as pb
from .auth import BearerTokenInterceptor
from .decode import add_servicer
from .info import DaemonFacts
from .servicer import AgentRuntimeServicer, ResumeObserver
from .tls import TlsError, server_credentials

SERVICE_NAME = pb.DESCRIPTOR.services_by_name["AgentRuntime"].full_name
HEALTH_SERVICES = ("", SERVICE_NAME)


class ListenError(Exception):
    """An address could not be bound; the message says which and why."""


async def set_health(health: HealthServicer, serving: bool) -> None:
    """Report SERVING or NOT_SERVING for the daemon and the AgentRuntime service."""
    status = health_pb2.HealthCheckResponse.SERVING if serving else health_pb2.HealthCheckResponse.NOT_SERVING
    for name in HEALTH_SERVICES:
        await health.set(name, status)


def create_server(settings: Settings, engine: Engine, hub: WorkerHub, health: HealthServicer, *,
                  on_resume: ResumeObserver | None = None,
                  ) -> tuple[aio.Server, list[str], AgentRuntimeServicer]:
    """A bound (not yet started) server, its resolved addresses and its servicer."""
    limit = settings.max_message_bytes
    interceptors = ([BearerTokenInterceptor(settings.auth_token, reflection_open=settings.reflection_open)]
                    if settings.auth_token else [])
    # so_reuseport off: a second daemon must fail to bind a busy port, not share it
    server = aio.server(interceptors=interceptors,
                        options=[("grpc.max_send_message_length", limit),
                                 ("grpc.max_receive_message_length", limit),
                                 ("grpc.so_reuseport", 0)])
    facts = DaemonFacts(limits=settings.limits, config=settings.redacted())
    servicer = AgentRuntimeServicer(engine, hub, facts, on_resume=on_resume)
    add_servicer(server, servicer, settings.limits.max_struct_depth)
    health_pb2_grpc.add_HealthServicer_to_server(health, server)
    health_name = health_pb2.DESCRIPTOR.services_by_name["Health"].full_name
    reflection.enable_server_reflection((SERVICE_NAME, health_name, reflection.SERVICE_NAME), server)
    try:
        credentials = server_credentials(settings.tls) if settings.tls else None
    except TlsError as exc:
        raise ListenError(str(exc)) from exc
    facts.listen = [bind(server, address, credentials) for address in settings.listen]
    return server, facts.listen, servicer


def bind(server: aio.Server, address: str, credentials: grpc.ServerCredentials | None = None) -> str:
    """Listen on ``address`` (``host:port`` or ``unix:/path``); returns it with the port resolved.

    TCP listeners use ``credentials`` when given; unix sockets never do.
    """
    if address.startswith("unix:"):
        return _bind_unix(server, address)
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ListenError(f"--listen {address!r}: want host:port (e.g. 127.0.0.1:50051) or unix:/path")
    bound = _add_port(server, address, credentials)
    return f"{host}:{bound}"


def _add_port(server: aio.Server, address: str, credentials: grpc.ServerCredentials | None = None) -> int:
    try:
        if credentials is not None:
            port = int(server.add_secure_port(address, credentials))
        else:
            port = int(server.add_insecure_port(address))
    except RuntimeError as exc:
        raise ListenError(f"cannot listen on {address}: {exc} (address in use or not local?)") from exc
    if port == 0:
        raise ListenError(f"cannot listen on {address} (address in use or not local?)")
    return port


def _bind_unix(server: aio.Server, address: str) -> str:
    path = Path(address.removeprefix("unix:").removeprefix("//"))
    if not path.is_absolute():
        path = path.resolve()
    if not path.parent.is_dir():
        raise ListenError(f"cannot listen on unix:{path}: directory {path.parent} does not exist")
    _remove_stale(path)
    with _umask(0o177):
        _add_port(server, f"unix:{path}")
    os.chmod(path, 0o600)
    return f"unix:{path}"


def _remove_stale(path: Path) -> None:
    """Delete a socket file nobody serves; refuse a live socket or a non-socket file."""
    if not path.exists() and not path.is_symlink():
        return
    if not stat.S_ISSOCK(path.lstat().st_mode):
        raise ListenError(f"cannot listen on unix:{path}: the path exists and is not a socket")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(str(path))
        except OSError:
            path.unlink()
            return
    raise ListenError(f"cannot listen on unix:{path}: another process is serving that socket")


@contextmanager
def _umask(mask: int) -> Iterator[Any]:
    # the socket is born owner-only, so no other user can connect before the chmod below
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)
