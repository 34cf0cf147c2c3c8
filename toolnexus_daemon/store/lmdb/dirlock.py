"""The single-holder lock on a data directory.

One daemon per data directory: LMDB itself would let two processes share an
environment, but two engines recovering the same handles would run every turn
twice. ``flock`` is released by the kernel when its holder dies, so a daemon
killed with SIGKILL never blocks its own restart; the holder's pid is written
into the lock file only so the refusal can name it.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from ...errors import StoreError, StoreLocked

LOCK_NAME = "toolnexus-daemon.lock"


class DirLock:
    """An exclusive ``flock`` on ``<directory>/toolnexus-daemon.lock``, held until ``release``."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / LOCK_NAME
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise StoreError(f"cannot open lock file {self.path}: {exc}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_pid(fd)
            os.close(fd)
            raise StoreLocked(f"data directory {directory} is in use by another toolnexus-daemon "
                              f"(pid {holder}); stop it or use another --data-dir") from None
        except OSError as exc:
            os.close(fd)
            raise StoreError(f"cannot lock {self.path}: {exc}") from exc
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd: int | None = fd

    def release(self) -> None:
        """Clear the pid and drop the lock; safe to call twice."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            os.ftruncate(fd, 0)
        finally:
            os.close(fd)


def _read_pid(fd: int) -> str:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", errors="replace").strip()
    except OSError:
        text = ""
    return text or "unknown"
