"""`make dist` builds what the docs install from: the daemon's wheel, the Python client's wheel and the
Node client's tarball; the wheels install into a fresh virtualenv and the daemon serves from them.

The fresh virtualenv borrows the third-party packages (grpcio, lmdb, ...) of the one running the tests
through a ``.pth`` line, so nothing is downloaded, while the daemon and the client come from the wheels
alone (a plain path in a ``.pth`` does not run the development venv's editable-install hooks), and
the processes run outside the checkout with no PYTHONPATH.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import threading
import time
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# what `make dist` writes (the docs' install commands are checked against these names)
DIST_FILES = ["toolnexus-client-0.1.0.tgz", "toolnexus_client-0.1.0-py3-none-any.whl",
              "toolnexus_daemon-0.1.0-py3-none-any.whl"]


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("npm") is None:
        pytest.skip("npm is not installed (make test installs the Node client with it)")
    out = tmp_path_factory.mktemp("dist")
    building = threading.Event()
    watcher = threading.Thread(target=_watch_checkout_proto, args=(building,), daemon=True)
    building.set()
    watcher.start()
    try:
        done = subprocess.run(["make", "-s", "-C", str(ROOT), "dist", f"DIST={out}"], capture_output=True,
                              text=True, timeout=180, check=False)
    finally:
        building.clear()
        watcher.join(5)
    assert done.returncode == 0, done.stdout + done.stderr
    return out


# set when clients/node/proto appeared in the checkout while `make dist` ran
PROTO_IN_CHECKOUT: list[bool] = []


def _watch_checkout_proto(building: threading.Event) -> None:
    """Look for a packing copy of proto/ in the checkout's Node client every 2 ms while dist builds
    (a Node process of the checkout loading the proto then could read a half-copied file)."""
    while building.is_set():
        if (ROOT / "clients" / "node" / "proto").exists():
            PROTO_IN_CHECKOUT.append(True)
            return
        time.sleep(0.002)


def test_make_dist_builds_the_three_files_the_docs_install(dist: Path) -> None:
    names = sorted(p.name for p in dist.iterdir())
    assert names == DIST_FILES, names
    with tarfile.open(dist / "toolnexus-client-0.1.0.tgz") as tgz:
        packed = set(tgz.getnames())
    # the contract travels with the Node client: it loads the proto at run time
    assert {"package/src/index.js", "package/src/index.d.ts",
            "package/proto/toolnexus/agents/v1/runtime.proto"} <= packed, packed
    # packed from a copy: the checkout's Node client never held a copy of proto/, even for a moment
    assert not PROTO_IN_CHECKOUT and not (ROOT / "clients" / "node" / "proto").exists()
    with zipfile.ZipFile(dist / "toolnexus_daemon-0.1.0-py3-none-any.whl") as whl:
        daemon_files = whl.namelist()
    assert "toolnexus_daemon/people/commands.py" in daemon_files
    # the web inspector's script and stylesheet are package data, served from the installed package
    assert {"toolnexus_daemon/web/inspector/static/inspector.js",
            "toolnexus_daemon/web/inspector/static/inspector.css"} <= set(daemon_files)
    assert not [n for n in daemon_files if n.startswith(("toolnexus_devtools", "tests/"))]
    # the commands for people drive the daemon through the Python client: the daemon's wheel needs it
    metadata = next(n for n in daemon_files if n.endswith(".dist-info/METADATA"))
    with zipfile.ZipFile(dist / "toolnexus_daemon-0.1.0-py3-none-any.whl") as whl:
        requires = [line for line in whl.read(metadata).decode().splitlines()
                    if line.startswith("Requires-Dist")]
    assert "Requires-Dist: toolnexus-client==0.1.0" in requires, requires
    with zipfile.ZipFile(dist / "toolnexus_client-0.1.0-py3-none-any.whl") as whl:
        assert {"toolnexus_client/py.typed", "toolnexus_client/aio/__init__.py"} <= set(whl.namelist())


def test_the_wheels_install_and_the_daemon_serves_from_them(dist: Path, tmp_path: Path) -> None:
    fresh = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(fresh)], check=True, timeout=60)
    site = Path(subprocess.run([str(fresh / "bin" / "python"), "-c", "import sysconfig; "
                                "print(sysconfig.get_paths()['purelib'])"], capture_output=True, text=True,
                               check=True, timeout=30).stdout.strip())
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the checkout's code stays out
    subprocess.run([sys.executable, "-m", "pip", "--python", str(fresh / "bin" / "python"), "install", "-q",
                    "--disable-pip-version-check", "--no-deps", "--no-index",
                    *map(str, sorted(dist.glob("*.whl")))], check=True, timeout=120, env=env)
    # after the install: pip would otherwise take the development venv's own installs for these
    (site / "borrowed-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    where = subprocess.run([str(fresh / "bin" / "python"), "-c", "import toolnexus_client.aio, "
                            "toolnexus_daemon; print(toolnexus_client.__file__, toolnexus_daemon.__file__)"],
                           capture_output=True, text=True, check=True, timeout=60, cwd=tmp_path, env=env)
    assert where.stdout.count(str(site)) == 2, where.stdout  # the wheels' copies, not the checkout's

    sock = tmp_path / "d.sock"
    daemon = subprocess.Popen([str(fresh / "bin" / "toolnexus-daemon"), "serve", "--listen", f"unix:{sock}",
                               "--data-dir", str(tmp_path / "data")], cwd=tmp_path, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert _healthy(fresh / "bin" / "toolnexus-daemon", f"unix:{sock}", env, daemon), _stderr(daemon)
        # a command for people, from the wheels: the daemon's through the client's
        command = [str(fresh / "bin" / "toolnexus-daemon"), "runtimes", "--target", f"unix:{sock}"]
        listed = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60, check=False)
        assert (listed.returncode, listed.stdout) == (0, "RUNTIME  CREATED  HANDLES  PENDING  KEYED\n"), \
            listed
    finally:
        daemon.terminate()
        daemon.wait(15)


def _healthy(command: Path, target: str, env: dict[str, str], daemon: subprocess.Popen[str]) -> bool:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and daemon.poll() is None:
        probe = subprocess.run([str(command), "health", "--target", target], env=env, capture_output=True,
                               timeout=30, check=False)
        if probe.returncode == 0:
            return True
        time.sleep(0.2)
    return False


def _stderr(daemon: subprocess.Popen[str]) -> str:
    daemon.kill()
    return daemon.communicate(timeout=10)[1]
