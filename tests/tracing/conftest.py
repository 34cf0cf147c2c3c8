"""Fixtures of the tracing tests: an OTLP/HTTP receiver and the scripted model server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from toolnexus_devtools import ScriptedModelServer

from .collector import Collector


@pytest.fixture
def collector() -> Iterator[Collector]:
    with Collector() as c:
        yield c


@pytest.fixture
def model_server() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as server:
        yield server
