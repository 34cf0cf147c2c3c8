"""Shared e2e fixtures: the scripted model server and a real daemon subprocess on a fresh data dir."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.daemon import DaemonProcess
from toolnexus_devtools import ScriptedModelServer


@pytest.fixture
def model_server() -> Iterator[ScriptedModelServer]:
    """An OpenAI-compatible HTTP server on 127.0.0.1 running the reference mock model by default."""
    with ScriptedModelServer() as server:
        yield server


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[DaemonProcess]:
    """The daemon serving on 127.0.0.1:<free port> with an LMDB store under tmp_path; stopped after."""
    proc = DaemonProcess(tmp_path / "data").start()
    try:
        yield proc
    finally:
        proc.stop()
