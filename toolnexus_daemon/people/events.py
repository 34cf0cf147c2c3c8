"""``events RUNTIME [--follow] [--after N]``: a runtime's event log, one line per event.

``Watch`` replays the stored events and then follows live ones with no marker
between the two, so without ``--follow`` the command stops once the stream has
been quiet for ``--idle`` seconds (the replay is sent at once, so a quiet
stream means it is done); with ``--follow`` it runs until interrupted
(Ctrl-C ends it with exit 0) or the daemon ends the stream.
"""

from __future__ import annotations

import argparse
import json
import queue
import threading
from typing import Any

from ..api._gen import runtime_pb2 as pb
from . import render
from .connect import Connection
from .exitcodes import CliError, Exit

_END = object()


def events(conn: Connection, ns: argparse.Namespace) -> int:
    request = pb.WatchRequest(runtime_id=ns.runtime, after_seq=ns.after, types=ns.type or [],
                              handle=ns.handle or "")
    stream = conn.stream(conn.stub.Watch, request)
    inbox: queue.Queue[Any] = queue.Queue()
    threading.Thread(target=_pump, args=(stream, inbox), daemon=True).start()
    idle = None if ns.follow else ns.idle
    while True:
        try:
            item = inbox.get(timeout=idle)
        except queue.Empty:
            return Exit.OK
        if item is _END:
            return Exit.OK
        if isinstance(item, CliError):
            raise item
        print(_line(item, ns.json), flush=True)


def _pump(stream: Any, inbox: queue.Queue[Any]) -> None:
    """Reads the stream on its own thread so the main one can stop on a quiet stream or Ctrl-C."""
    try:
        for event in stream:
            inbox.put(event)
    except CliError as err:
        inbox.put(err)
    inbox.put(_END)


def _line(e: pb.Event, as_json: bool) -> str:
    """One event: a JSON object per line for scripts (``jq`` reads a stream of them), else
    ``seq  time  handle  type  what happened``."""
    if as_json:
        return json.dumps(render.to_json(e), ensure_ascii=False)
    note = e.note.removeprefix(f"{e.handle}: ")
    if e.HasField("pending") and e.type == "pending":
        note = f"{e.pending.kind} {e.pending.id}: \"{render.clip(e.pending.prompt, 40)}\""
    elif e.HasField("result") and e.type == "result":
        note = e.result.status + (f" \"{render.clip(e.result.text, 50)}\"" if e.result.text else "")
    clock = e.at[11:23] if len(e.at) >= 23 else (e.at or "-")
    return "  ".join(p for p in (f"{e.seq:>5}", clock, e.handle or "-", e.type, render.clip(note, 80)) if p)
