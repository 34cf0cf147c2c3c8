"""Which operating-system process a lease holder is, and whether that process is provably gone.

A daemon killed with SIGKILL leaves its runtime leases to expire: nobody can tell a dead
holder from a silent one (paused, partitioned), so the others wait a lease. Except on the
same machine: a process is named by the host's boot id, its pid namespace, its pid and its
start time, and a daemon that shares the first two can look the process up. If it no longer
runs (or the pid now names another process, or a zombie), it can act for nothing any more,
and its leases may be taken at once — as a restart after ``kill -9`` on one machine does.

On a system without ``/proc`` the identity is empty and nothing is ever judged dead.
"""

from __future__ import annotations

import os
from pathlib import Path

_PROC = Path("/proc")


UNKNOWN = "?"


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot; None when no live process has ``pid``;
    ``UNKNOWN`` when one may exist but cannot be looked at (``/proc`` mounted with ``hidepid``)."""
    try:
        stat = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        try:
            os.kill(pid, 0)  # signal 0: only asks whether the pid exists
        except ProcessLookupError:
            return None
        except OSError:
            return UNKNOWN  # exists, belongs to someone else
        return UNKNOWN
    fields = stat[stat.rfind(")") + 2:].split()  # after "pid (comm) "
    if not fields or fields[0] in ("Z", "X"):  # a zombie or dead task acts for nothing
        return None
    return fields[19] if len(fields) > 19 else UNKNOWN


def _host_scope() -> str:
    """Boot id and pid namespace: where a pid means the same process."""
    try:
        boot = (_PROC / "sys/kernel/random/boot_id").read_text().strip()
        namespace = os.readlink(_PROC / "self/ns/pid")
    except OSError:
        return ""
    return f"{boot}|{namespace}"


def this_process() -> str:
    """This process's identity (``scope|pid|start``), or "" where it cannot be told."""
    scope, start = _host_scope(), _start_time(os.getpid())
    return f"{scope}|{os.getpid()}|{start}" if scope and start and start != UNKNOWN else ""


def scope_of(process: str) -> str:
    return process.rsplit("|", 2)[0] if process.count("|") >= 3 else ""


def gone_here(process: str) -> bool:
    """True only when ``process`` is a process of this host and pid namespace that no longer runs."""
    scope = _host_scope()
    if not process or not scope or scope_of(process) != scope:
        return False
    pid_text, start = process.rsplit("|", 2)[1:]
    if not pid_text.isdigit() or int(pid_text) == os.getpid() and start == _start_time(os.getpid()):
        return False
    now = _start_time(int(pid_text))
    return now is None or now not in (start, UNKNOWN)  # gone, or the pid names another process now
