"""``runtimes`` and ``pending``: the daemon-wide lists, every page of them, as a table or JSON.

``pending`` filters on the daemon's side (``ListPendingRequest``): ``--runtime``, ``--kind``, and
``--older-than`` (a duration such as ``90s``, ``15m``, ``2h``, ``1d``: only requests waiting at
least that long).
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator, Mapping

from toolnexus_client import PendingItem, RuntimeSummary

from . import render
from .connect import Connection
from .exitcodes import CliError, Exit

# a bound on the pages one command walks: a daemon handing out tokens forever must not loop us forever
MAX_PAGES = 10_000
STATES = ("running", "suspended", "idle", "closed")


_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")


def duration_ms(text: str, flag: str) -> int:
    """``"90s"``, ``"15m"``, ``"1h30m"``, ``"2d"`` as milliseconds; anything else is a usage error."""
    parts = _DURATION.findall(text.strip())
    if not parts or "".join(n + u for n, u in parts) != text.strip():
        raise CliError(Exit.USAGE, f"{flag} {text!r} is not a duration: use a number and a unit, "
                                   "ms s m h or d (90s, 15m, 1h30m, 2d)")
    return int(sum(float(n) * _UNITS_MS[u] for n, u in parts))


def all_pending(conn: Connection, runtime: str = "", kind: str = "",
                min_age_ms: int = 0) -> Iterator[PendingItem]:
    """Every open suspension matching the filters, oldest first, page after page (each page a call
    with the command's --timeout)."""
    token = ""
    for _ in range(MAX_PAGES):
        reply = conn.call(conn.daemon.list_pending, runtime or None, kind or None, min_age_ms,
                          page_size=1000, page_token=token)
        yield from reply.items
        token = reply.next_page_token
        if not token:
            return


def all_runtimes(conn: Connection) -> Iterator[RuntimeSummary]:
    token = ""
    for _ in range(MAX_PAGES):
        reply = conn.call(conn.daemon.list_runtimes, page_size=1000, page_token=token)
        yield from reply.runtimes
        token = reply.next_page_token
        if not token:
            return


def runtimes(conn: Connection, ns: argparse.Namespace) -> int:
    found = list(all_runtimes(conn))
    if ns.json:
        render.out(render.dumps([render.to_json(r) for r in found]), end="")
        return Exit.OK
    rows = [[r.runtime_id, render.when(r.created_at), _counts(r.handles), str(r.pending),
             "yes" if r.keyed else ""] for r in found]
    render.out(render.table(["runtime", "created", "handles", "pending", "keyed"], rows, flex=2), end="")
    return Exit.OK


def _counts(handles: Mapping[str, int]) -> str:
    """``"1 running, 2 suspended"``: the states in a fixed order, then any the daemon adds later."""
    counts = dict(handles)
    order = [s for s in STATES if counts.get(s)] + sorted(s for s in counts if s not in STATES and counts[s])
    return ", ".join(f"{counts[s]} {s}" for s in order) or "none"


def pending(conn: Connection, ns: argparse.Namespace) -> int:
    older = duration_ms(ns.older_than, "--older-than") if ns.older_than else 0
    items = list(all_pending(conn, ns.runtime or "", ns.kind or "", older))
    if ns.json:
        render.out(render.dumps([render.to_json(i) for i in items]), end="")
        return Exit.OK
    rows = [[i.request.id, i.request.kind, i.runtime_id, i.handle, render.when(i.created_at),
             render.when(i.expires_at or ""), render.clip(i.request.prompt)] for i in items]
    headers = ["request", "kind", "runtime", "handle", "waiting", "expires", "prompt"]
    render.out(render.table(headers, rows, flex=6), end="")
    return Exit.OK
