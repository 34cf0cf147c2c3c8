"""``events RUNTIME [--follow] [--after N]``: a runtime's event log, one line per event.

``Watch`` replays the stored events and then follows live ones with no marker
between the two, so without ``--follow`` the command stops once the stream has
been quiet for ``--idle`` seconds (the replay is sent at once, so a quiet
stream means it is done); with ``--follow`` it runs until interrupted
(Ctrl-C ends it with exit 0). A followed stream the daemon ends with
UNAVAILABLE (a restart, a runtime moving in a cluster) is opened again after
the last seq printed, with backoff, as the clients do: nothing is missed or
printed twice; after ``REOPEN_ATTEMPTS`` failures in a row it exits 4.
"""

from __future__ import annotations

import argparse
import json
import queue
import sys
import threading
import time
from typing import Any

from ..api._gen import runtime_pb2 as pb
from . import render
from .connect import Connection
from .exitcodes import CliError, Exit

_END = object()
REOPEN_ATTEMPTS = 30
REOPEN_FIRST_S, REOPEN_MAX_S = 0.1, 2.0


def events(conn: Connection, ns: argparse.Namespace) -> int:
    inbox: queue.Queue[Any] = queue.Queue()
    threading.Thread(target=_pump, args=(conn, ns, inbox), daemon=True).start()
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


def _pump(conn: Connection, ns: argparse.Namespace, inbox: queue.Queue[Any]) -> None:
    """Reads the stream on its own thread so the main one can stop on a quiet stream or Ctrl-C;
    when following, reopens it after UNAVAILABLE from the last seq seen."""
    last, failures = ns.after, 0
    while True:
        request = pb.WatchRequest(runtime_id=ns.runtime, after_seq=last, types=ns.type or [],
                                  handle=ns.handle or "")
        try:
            for event in conn.stream(conn.stub.Watch, request):
                last, failures = event.seq or last, 0
                inbox.put(event)
        except CliError as err:
            if not (ns.follow and err.code == Exit.UNREACHABLE and failures < REOPEN_ATTEMPTS):
                inbox.put(err)
                break
            print(f"toolnexus-daemon events: {err.message}; watching again after seq {last}",
                  file=sys.stderr, flush=True)
            time.sleep(min(REOPEN_MAX_S, REOPEN_FIRST_S * 2 ** failures))
            failures += 1
            continue
        break
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
