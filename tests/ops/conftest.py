"""Fixtures for operating the daemon: certificates, the serving log record, metrics scrapes, bare runs.

These tests each start daemons with their own flags (TLS, tokens, limits,
metrics), so there is no shared module daemon here except where a test
module makes one for itself.
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.ops.certs import Certs, make_certs
from tests.support.daemon import DaemonProcess
from toolnexus_devtools import ScriptedModelServer


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture
def model() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as srv:
        yield srv


def serving_record(proc: DaemonProcess) -> dict[str, Any]:
    """The ``serving`` log line of the daemon's latest start, parsed."""
    for line in reversed(proc.log_lines):
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict) and rec.get("msg") == "serving":
            return rec
    raise AssertionError("no serving line in the daemon log:\n" + proc.logs())


def scrape(address: str) -> str:
    """GET /metrics from ``host:port``."""
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=5) as reply:  # noqa: S310  # loopback
        assert reply.status == 200
        return str(reply.read().decode())


def run_serve(data_dir: Path, *args: str,
              env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``toolnexus-daemon serve`` expected to exit by itself (a refused configuration)."""
    cmd = [sys.executable, "-m", "toolnexus_daemon", "serve", "--data-dir", str(data_dir), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=30, env=env)
