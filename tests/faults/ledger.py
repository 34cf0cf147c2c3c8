"""The tool ledger: one fsync'd JSON line per tool execution, so no kill can lose an entry.

The worker appends ``{call_id, tool, handle, args, gen, stream}`` *before* it runs a
tool's effect and before it replies, so the ledger holds every execution the
daemon caused, including one whose reply the daemon never committed. ``gen``
is the daemon incarnation that dispatched the call (0 before the first kill),
which is what lets the checks tell a re-dispatch of a call that was in flight
at a kill (allowed, counted) from a re-run of a call whose result the daemon
had already committed (a loss of exactly-once).
"""

from __future__ import annotations

import json
import os
import threading
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Execution:
    call_id: str
    tool: str
    handle: str
    args: dict[str, Any]
    gen: int
    stream: int  # which Connect stream of the worker delivered it (1 = the first)


class Ledger:
    """An append-only file of executions; safe to append from many threads."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def append(self, execution: Execution) -> None:
        line = json.dumps({"call_id": execution.call_id, "tool": execution.tool, "handle": execution.handle,
                           "args": execution.args, "gen": execution.gen,
                           "stream": execution.stream}, sort_keys=True) + "\n"
        with self._lock:
            os.write(self._fd, line.encode())
            os.fsync(self._fd)

    def close(self) -> None:
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1


def read_ledger(path: Path) -> dict[str, list[Execution]]:
    """Every execution in the file, grouped by call_id in append order."""
    by_call: dict[str, list[Execution]] = defaultdict(list)
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        by_call[rec["call_id"]].append(Execution(rec["call_id"], rec["tool"], rec["handle"], rec["args"],
                                                 int(rec["gen"]), int(rec["stream"])))
    return dict(by_call)
