"""The MCP listener serves HTTPS with the daemon's certificate (``--tls-cert``/``--tls-key``) and,
with ``--tls-client-ca``, wants a client certificate, as the gRPC listener does."""

from __future__ import annotations

import ssl
from pathlib import Path

import httpx2
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.mcp_server.conftest import mcp_address
from tests.ops.certs import Certs, make_certs
from tests.support.daemon import DaemonProcess


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


async def _tools(url: str, context: ssl.SSLContext) -> list[str]:
    async with httpx2.AsyncClient(verify=context) as http, \
            streamable_http_client(url, http_client=http) as (read, write), \
            ClientSession(read, write) as session:
        await session.initialize()
        return [t.name for t in (await session.list_tools()).tools]


async def test_mcp_over_tls_and_mtls(tmp_path: Path, certs: Certs) -> None:
    args = ("--tls-cert", str(certs.server.cert), "--tls-key", str(certs.server.key),
            "--mcp-listen", "127.0.0.1:0", "--mcp-expose", "nothing-yet")
    with DaemonProcess(tmp_path / "tls", *args) as daemon:
        url = f"https://{mcp_address(daemon)}/mcp"
        trusting = ssl.create_default_context(cafile=str(certs.ca))
        assert await _tools(url, trusting) == []  # HTTPS answers (the runtime does not exist yet)
        with pytest.raises(Exception):  # noqa: B017  # an untrusted certificate: the SDK wraps the TLS error
            await _tools(url, ssl.create_default_context())
    with DaemonProcess(tmp_path / "mtls", *args, "--tls-client-ca", str(certs.ca)) as daemon:
        url = f"https://{mcp_address(daemon)}/mcp"
        with pytest.raises(Exception):  # noqa: B017  # no client certificate: the handshake fails
            await _tools(url, ssl.create_default_context(cafile=str(certs.ca)))
        presenting = ssl.create_default_context(cafile=str(certs.ca))
        presenting.load_cert_chain(str(certs.client.cert), str(certs.client.key))
        assert await _tools(url, presenting) == []
