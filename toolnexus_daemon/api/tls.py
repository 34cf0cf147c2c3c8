"""Server credentials for TLS and mTLS (``--tls-cert``, ``--tls-key``, ``--tls-client-ca``).

The files are read here, when the server binds, so the private key never sits
in ``Settings`` (which is logged and reported by ``Info``). gRPC only parses
PEM when the port is added, and then fails without saying why; a file that is
not PEM at all is refused here first with a message naming the flag.
"""

from __future__ import annotations

from pathlib import Path

import grpc

from ..config import Tls


class TlsError(Exception):
    """A TLS file is unreadable or not PEM; the message names the flag."""


def server_credentials(tls: Tls) -> grpc.ServerCredentials:
    """Credentials for every TCP listener; with a client CA, clients must present a certificate."""
    cert = _pem("--tls-cert", tls.cert, b"CERTIFICATE")
    key = _pem("--tls-key", tls.key, b"PRIVATE KEY")
    client_ca = _pem("--tls-client-ca", tls.client_ca, b"CERTIFICATE") if tls.client_ca else None
    return grpc.ssl_server_credentials([(key, cert)], root_certificates=client_ca,
                                       require_client_auth=client_ca is not None)


def _pem(flag: str, path: Path, label: bytes) -> bytes:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TlsError(f"{flag}: cannot read {path}: {exc.strerror}") from exc
    if b"-----BEGIN " not in data or label not in data:
        raise TlsError(f"{flag}: {path} is not a PEM file holding a {label.decode().lower()}")
    return data
