"""Fixtures: a real scripted HTTP server on loopback and a port nothing listens on."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from toolnexus_devtools import ScriptedModelServer


@pytest.fixture
def server() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as srv:
        yield srv


@pytest.fixture
def closed_port() -> int:
    """A loopback port that was free a moment ago, so connecting to it is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
