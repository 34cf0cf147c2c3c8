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
import queue
import threading
from typing import Any

from toolnexus_client import Event

from . import render
from .connect import Connection
from .exitcodes import CliError, Exit

_END = object()
REOPEN_ATTEMPTS = 30
REOPEN_FIRST_S, REOPEN_MAX_S = 0.1, 2.0


class _Stop:
    """What Ctrl-C needs to end a followed stream at once: no reopen after it, and the call
    in flight cancelled from the main thread, so nothing is left for the channel's close to
    wait on while the process exits."""

    def __init__(self) -> None:
        self.stopped = threading.Event()
        self.calls: list[Any] = []

    def now(self) -> None:
        self.stopped.set()
        for call in self.calls:
            call.cancel()


def events(conn: Connection, ns: argparse.Namespace) -> int:
    inbox: queue.Queue[Any] = queue.Queue()
    stop = _Stop()
    pump = threading.Thread(target=_pump, args=(conn, ns, inbox, stop), daemon=True)
    pump.start()
    try:
        return _print(inbox, None if ns.follow else ns.idle, ns.json)
    except KeyboardInterrupt:
        stop.now()
        pump.join(timeout=2.0)
        raise


def _print(inbox: queue.Queue[Any], idle: float | None, as_json: bool) -> int:
    while True:
        try:
            item = inbox.get(timeout=idle)
        except queue.Empty:
            return Exit.OK
        if item is _END:
            return Exit.OK
        if isinstance(item, CliError):
            raise item
        render.out(_line(item, as_json))


def _pump(conn: Connection, ns: argparse.Namespace, inbox: queue.Queue[Any], stop: _Stop) -> None:
    """Reads the stream on its own thread so the main one can stop on a quiet stream or Ctrl-C;
    when following, reopens it after UNAVAILABLE from the last seq seen."""
    last, failures = ns.after, 0
    while True:
        try:
            for event in conn.events(ns.runtime, last, ns.type or [], ns.handle or "",
                                     started=stop.calls.append):
                last, failures = event.seq or last, 0
                inbox.put(event)
        except CliError as err:
            if stop.stopped.is_set():
                break
            if not (ns.follow and err.code == Exit.UNREACHABLE and failures < REOPEN_ATTEMPTS):
                inbox.put(err)
                break
            render.err(f"toolnexus-daemon events: {err.message}; watching again after seq {last}")
            if stop.stopped.wait(min(REOPEN_MAX_S, REOPEN_FIRST_S * 2 ** failures)):
                break
            failures += 1
            continue
        break
    inbox.put(_END)


def _line(e: Event, as_json: bool) -> str:
    """One event: a JSON object per line for scripts (``jq`` reads a stream of them), else
    ``seq  time  handle  type  what happened``."""
    if as_json:
        return render.dumps_line(render.to_json(e))
    note = e.note.removeprefix(f"{e.handle}: ")
    if e.pending is not None and e.type == "pending":
        note = f"{e.pending.kind} {e.pending.id}: \"{e.pending.prompt}\""
    elif e.result is not None and e.type == "result":
        note = e.result.status + (f" \"{e.result.text}\"" if e.result.text else "")
    clock = e.at[11:23] if len(e.at) >= 23 else (e.at or "-")
    head = (f"{e.seq:>5}", render.visible(clock), render.visible(e.handle or "-"), render.visible(e.type))
    return render.fit("  ".join(p for p in (*head, render.clip(note, render.WIDTH)) if p))
