"""``inspect RUNTIME [HANDLE]``: a runtime's handle tree, drawn as a tree, with what each waits on.

One ``List`` gives every handle in pre-order with its parent, so the tree is
drawn from a single consistent read; with ``HANDLE`` a ``Snapshot`` first says
whether it exists (not found → exit 3) and only its subtree is drawn.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator

from toolnexus_client import HandleSnapshot

from . import render
from .connect import Connection
from .exitcodes import Exit

ROOT = "root"
BRANCH, LAST, PIPE, SPACE = "├── ", "└── ", "│   ", "    "


def inspect(conn: Connection, ns: argparse.Namespace) -> int:
    top = ns.handle or ROOT
    if ns.handle:
        conn.call(conn.daemon.snapshot, ns.runtime, ns.handle)
    handles = conn.call(conn.daemon.list_handles, ns.runtime)
    children: dict[str, list[HandleSnapshot]] = {}
    for h in handles:
        children.setdefault(h.parent, []).append(h)
    shown = [h for h in handles if h.id == top] + list(_descendants(top, children))
    if ns.json:
        render.out(render.dumps([render.to_json(h) for h in shown]), end="")
        return Exit.OK
    if top == ROOT or not shown:
        lines = [f"runtime {render.visible(ns.runtime)}" if top == ROOT else render.visible(top)]
    else:
        lines = list(_lines(shown[0], "", ""))
    lines += _draw(top, children, "")
    if top == ROOT and not handles:
        lines.append("(no handles)")
    render.out("\n".join(render.fit(line) for line in lines))
    return Exit.OK


def _descendants(parent: str, children: dict[str, list[HandleSnapshot]]) -> Iterator[HandleSnapshot]:
    for child in children.get(parent, []):
        yield child
        yield from _descendants(child.id, children)


def _draw(parent: str, children: dict[str, list[HandleSnapshot]], indent: str) -> Iterator[str]:
    kids = children.get(parent, [])
    for n, child in enumerate(kids):
        last = n == len(kids) - 1
        more = indent + (SPACE if last else PIPE)
        yield from _lines(child, indent + (LAST if last else BRANCH), more)
        for change in child.definition_changed:
            yield more + f"  ! {render.clip(change.summary, render.WIDTH)}"
        yield from _draw(child.id, children, more)


def _lines(h: HandleSnapshot, first: str, more: str) -> Iterator[str]:
    """The handle's line, then (indented under it) what it waits on: two lines, so that a tree a
    few levels deep still fits the width of a terminal with the request id whole."""
    yield first + describe(h)
    waits = waits_on(h)
    if waits:
        yield more + (PIPE if h.children else SPACE) + waits


def describe(h: HandleSnapshot) -> str:
    """``id  agent  state  usage`` on one line."""
    tokens = render.plural(h.usage_total, "token") + (" (estimated)" if h.usage_estimated else "")
    usage = f"{tokens}, {render.plural(h.turns_total, 'turn')}"
    ids = (render.visible(h.id), render.visible(h.agent), render.visible(h.state))
    return "  ".join(part for part in (*ids, usage) if part)


def waits_on(h: HandleSnapshot) -> str:
    """What the handle waits on: its own request, a suspended child, or nothing (its last result)."""
    if h.pending is not None:
        p = h.pending
        expiry = f" (expires {render.visible(render.when(p.expires_at))})" if p.expires_at else ""
        kind = render.visible(p.kind or "request")
        return f"waits on {kind} {render.visible(p.id)}{expiry}: \"{render.clip(p.prompt, 50)}\""
    if h.state == "suspended":
        return f"waits on {render.visible(', '.join(h.children)) or 'a child'}"
    if h.last_result is not None and h.state != "running":
        r = h.last_result
        return f"last: {render.visible(r.status)}" + (f" \"{render.clip(r.text, 40)}\"" if r.text else "")
    return ""
