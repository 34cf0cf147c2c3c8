"""``versions``: a runtime's registry versions, oldest first, with the handles pinned to each.

Every ``New`` whose registry differs from the latest makes a version; a handle runs the version it
was spawned or last woken under (docs/versions.md). The table shows which versions still hold
handles — an old build's worker must keep serving those — and which one is the latest.
"""

from __future__ import annotations

import argparse

from . import render
from .connect import Connection
from .exitcodes import Exit


def versions(conn: Connection, ns: argparse.Namespace) -> int:
    found = conn.call(conn.daemon.list_versions, ns.runtime)
    if ns.json:
        render.out(render.dumps([render.to_json(v) for v in found]), end="")
        return Exit.OK
    rows = [[str(v.number), "yes" if v.latest else "", str(v.handles), render.when(v.created_at),
             v.digest[:12]] for v in found]
    render.out(render.table(["version", "latest", "handles", "created", "digest"], rows, flex=4), end="")
    return Exit.OK
