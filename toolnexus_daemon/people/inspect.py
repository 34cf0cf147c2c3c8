"""``inspect RUNTIME [HANDLE]``: a runtime's handle tree, drawn as a tree, with what each waits on.

One ``List`` gives every handle in pre-order with its parent, so the tree is
drawn from a single consistent read; with ``HANDLE`` a ``Snapshot`` first says
whether it exists (not found → exit 3) and only its subtree is drawn.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator

from ..api._gen import runtime_pb2 as pb
from . import render
from .connect import Connection
from .exitcodes import Exit

ROOT = "root"
BRANCH, LAST, PIPE, SPACE = "├── ", "└── ", "│   ", "    "


def inspect(conn: Connection, ns: argparse.Namespace) -> int:
    top = ns.handle or ROOT
    if ns.handle:
        conn.call(conn.stub.Snapshot, pb.SnapshotRequest(runtime_id=ns.runtime, handle=ns.handle))
    handles = list(conn.call(conn.stub.List, pb.ListRequest(runtime_id=ns.runtime)).handles)
    children: dict[str, list[pb.HandleSnapshot]] = {}
    for h in handles:
        children.setdefault(h.parent, []).append(h)
    shown = [h for h in handles if h.id == top] + list(_descendants(top, children))
    if ns.json:
        print(render.dumps([render.to_json(h) for h in shown]), end="")
        return Exit.OK
    header = f"runtime {ns.runtime}" if top == ROOT else describe(shown[0]) if shown else top
    lines = [header, *_draw(top, children, "")]
    if top == ROOT and not handles:
        lines.append("(no handles)")
    print("\n".join(lines))
    return Exit.OK


def _descendants(parent: str, children: dict[str, list[pb.HandleSnapshot]]) -> Iterator[pb.HandleSnapshot]:
    for child in children.get(parent, []):
        yield child
        yield from _descendants(child.id, children)


def _draw(parent: str, children: dict[str, list[pb.HandleSnapshot]], indent: str) -> Iterator[str]:
    kids = children.get(parent, [])
    for n, child in enumerate(kids):
        last = n == len(kids) - 1
        yield indent + (LAST if last else BRANCH) + describe(child)
        more = indent + (SPACE if last else PIPE)
        for change in child.definition_changed:
            yield more + f"  ! {change.summary}"
        yield from _draw(child.id, children, more)


def describe(h: pb.HandleSnapshot) -> str:
    """``id  agent  state  usage  what it waits on`` on one line."""
    usage = f"{h.usage_total} tokens{' (estimated)' if h.usage_estimated else ''}, {h.turns_total} turns"
    return "  ".join(part for part in (h.id, h.agent, h.state, usage, waits_on(h)) if part)


def waits_on(h: pb.HandleSnapshot) -> str:
    """What the handle waits on: its own request, a suspended child, or nothing (its last result)."""
    if h.HasField("pending"):
        p = h.pending
        expiry = f", expires {render.when(p.expires_at)}" if p.expires_at else ""
        return f"waits on {p.kind or 'request'} {p.id}: \"{render.clip(p.prompt, 50)}\"{expiry}"
    if h.state == "suspended":
        return f"waits on {', '.join(h.children) or 'a child'}"
    if h.HasField("last_result") and h.state != "running":
        r = h.last_result
        return f"last: {r.status}" + (f" \"{render.clip(r.text, 40)}\"" if r.text else "")
    return ""
