"""Start the real daemon as a subprocess for tests (docs/protocol.md §8).

The daemon logs JSON lines to stderr; once it is serving it logs
``{"msg": "serving", "addresses": [...]}`` with the bound addresses (port 0
resolved), which is how tests learn where to connect.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

# which durable store the daemons of a test run keep their state in: "lmdb" (the default) or
# "postgres" (a database of each daemon's own on the session's PostgreSQL server); `make test-all`
# runs the daemon suites once with each
STORE_ENV = "TOOLNEXUS_TEST_STORE"
STORES = ("lmdb", "postgres")
_databases: dict[Path, str] = {}


def run_store() -> str:
    """The store of this run, from TOOLNEXUS_TEST_STORE; a typo fails loudly rather than testing LMDB."""
    kind = os.environ.get(STORE_ENV, "lmdb") or "lmdb"
    if kind not in STORES:
        raise RuntimeError(f"{STORE_ENV}={kind!r}: want one of {', '.join(STORES)}")
    return kind


def database_for(data_dir: Path) -> str:
    """The DSN of the database that stands in for ``data_dir``: made on first use, the same one on
    every restart of a daemon on that directory (crash tests restart it)."""
    if data_dir not in _databases:
        from .pg_fixtures import shared_server

        _databases[data_dir] = shared_server().create_database()
    return _databases[data_dir]


class DaemonProcess:
    """One daemon subprocess bound to 127.0.0.1:0 (and optional unix sockets)."""

    def __init__(self, data_dir: Path, *extra_args: str, listen: tuple[str, ...] = ("127.0.0.1:0",),
                 env: dict[str, str] | None = None, python: str = sys.executable,
                 cwd: Path | None = None) -> None:
        self.data_dir = data_dir
        self.python, self.cwd = python, cwd
        named = next((extra_args[i + 1] for i, a in enumerate(extra_args[:-1]) if a == "--store"), None)
        # the DSN of a PostgreSQL store: the one the test names, else the run's (TOOLNEXUS_TEST_STORE)
        self.store_dsn = named or (database_for(data_dir) if run_store() == "postgres" else None)
        if self.store_dsn and not named:
            extra_args = (*extra_args, "--store", self.store_dsn)
        self.extra_args = extra_args
        self.listen = listen
        self.env = {**os.environ, **(env or {})}
        self.proc: subprocess.Popen[str] | None = None
        self.addresses: list[str] = []
        self.log_lines: list[str] = []
        self._serving = threading.Event()

    @property
    def target(self) -> str:
        return self.addresses[0]

    def start(self, timeout: float = 30.0) -> DaemonProcess:
        args = [self.python, "-m", "toolnexus_daemon", "serve", "--data-dir", str(self.data_dir)]
        for addr in self.listen:
            args += ["--listen", addr]
        args += list(self.extra_args)
        self._serving.clear()
        self.proc = subprocess.Popen(args, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                     text=True, env=self.env, cwd=self.cwd)
        threading.Thread(target=self._drain, args=(self.proc,), daemon=True).start()
        deadline = time.monotonic() + timeout
        while not self._serving.wait(0.05):
            if self.proc.poll() is not None:
                time.sleep(0.1)
                raise RuntimeError(f"daemon exited with {self.proc.returncode}:\n" + self.logs())
            if time.monotonic() > deadline:
                self.kill9()
                raise RuntimeError("daemon did not start serving in time:\n" + self.logs())
        return self

    def _drain(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            self.log_lines.append(line.rstrip("\n"))
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict) and rec.get("msg") == "serving":
                self.addresses = list(rec.get("addresses") or [])
                self._serving.set()

    def logs(self) -> str:
        return "\n".join(self.log_lines)

    def has_logged(self, text: str, timeout: float = 10.0) -> bool:
        """Whether ``text`` appears in the log within ``timeout``: the drain thread reads stderr
        asynchronously, so a line the daemon wrote an instant ago may not be in ``logs()`` yet."""
        deadline = time.monotonic() + timeout
        while text not in self.logs():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.02)
        return True

    def kill9(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self, timeout: float = 15.0) -> int:
        """SIGTERM and wait; returns the exit code."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill9()
        return self.proc.returncode

    def restart(self) -> DaemonProcess:
        self.stop()
        return self.start()

    def __enter__(self) -> DaemonProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
