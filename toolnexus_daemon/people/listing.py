"""``runtimes`` and ``pending``: the daemon-wide lists, every page of them, as a table or JSON."""

from __future__ import annotations

import argparse
from collections.abc import Iterator, Mapping

from ..api._gen import runtime_pb2 as pb
from . import render
from .connect import Connection
from .exitcodes import Exit

# a bound on the pages one command walks: a daemon handing out tokens forever must not loop us forever
MAX_PAGES = 10_000
STATES = ("running", "suspended", "idle", "closed")


def all_pending(conn: Connection, runtime: str = "", kind: str = "") -> Iterator[pb.PendingItem]:
    """Every open suspension matching the filters, oldest first, page after page."""
    token = ""
    for _ in range(MAX_PAGES):
        request = pb.ListPendingRequest(runtime_id=runtime, kind=kind, page_size=1000, page_token=token)
        reply = conn.call(conn.stub.ListPending, request)
        yield from reply.items
        token = reply.next_page_token
        if not token:
            return


def all_runtimes(conn: Connection) -> Iterator[pb.RuntimeSummary]:
    token = ""
    for _ in range(MAX_PAGES):
        reply = conn.call(conn.stub.ListRuntimes, pb.ListRuntimesRequest(page_size=1000, page_token=token))
        yield from reply.runtimes
        token = reply.next_page_token
        if not token:
            return


def runtimes(conn: Connection, ns: argparse.Namespace) -> int:
    found = list(all_runtimes(conn))
    if ns.json:
        print(render.dumps([render.to_json(r) for r in found]), end="")
        return Exit.OK
    rows = [[r.runtime_id, render.when(r.created_at), _counts(r.handles), str(r.pending),
             "yes" if r.keyed else ""] for r in found]
    print(render.table(["runtime", "created", "handles", "pending", "keyed"], rows), end="")
    return Exit.OK


def _counts(handles: Mapping[str, int]) -> str:
    """``"1 running, 2 suspended"``: the states in a fixed order, then any the daemon adds later."""
    counts = dict(handles)
    order = [s for s in STATES if counts.get(s)] + sorted(s for s in counts if s not in STATES and counts[s])
    return ", ".join(f"{counts[s]} {s}" for s in order) or "none"


def pending(conn: Connection, ns: argparse.Namespace) -> int:
    items = list(all_pending(conn, ns.runtime or "", ns.kind or ""))
    if ns.json:
        print(render.dumps([render.to_json(i) for i in items]), end="")
        return Exit.OK
    rows = [[i.request.id, i.request.kind, i.runtime_id, i.handle, render.when(i.created_at),
             render.when(i.expires_at), render.clip(i.request.prompt)] for i in items]
    print(render.table(["request", "kind", "runtime", "handle", "waiting since", "expires", "prompt"], rows),
          end="")
    return Exit.OK
