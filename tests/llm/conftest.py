"""Fixtures: a real scripted HTTP server on loopback, a port nothing listens on, a recording sleep."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from toolnexus_devtools import ScriptedModelServer


class RecordingSleep:
    """An injectable sleep that records the delays instead of waiting."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


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


@pytest.fixture
def sleep() -> RecordingSleep:
    return RecordingSleep()
