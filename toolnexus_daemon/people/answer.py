"""``answer REQUEST_ID`` and ``resume RUNTIME REQUEST_ID``: answer an open request.

``answer`` finds the runtime itself through ``ListPending`` (the request id open in exactly one
place); open in several runtimes or handles, it refuses with exit 7 and names them, rather than
guess. ``resume`` names the runtime and can feed the answer to a changed definition
(``--accept-changed-definition``). Both take the answer's data as ``--data JSON`` or
``--data-file PATH`` (``-`` for stdin), parsed before anything is sent: bad JSON is a usage
error naming the problem.

A request that is no longer open — answered (the same answer or another), cancelled — exits 3
(not found) with and without ``--runtime``: without it ``ListPending`` cannot tell an answered
request from one never asked, so with it the command says the same, adding what the daemon
knows (the same answer again changed nothing; a different one was refused).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from toolnexus_client import Answer

from . import render
from .connect import Connection
from .exitcodes import CliError, Exit
from .listing import all_pending

# how the daemon's FAILED_PRECONDITION says the request was answered or cancelled already
_NO_LONGER_OPEN = "was already "


def add_answer_flags(p: argparse.ArgumentParser) -> None:
    choice = p.add_mutually_exclusive_group(required=True)
    choice.add_argument("--approve", action="store_true", help="answer ok")
    choice.add_argument("--decline", action="store_true", help="answer not ok")
    p.add_argument("--reason", metavar="R", help="why (default for --decline: declined)")
    data = p.add_mutually_exclusive_group()
    data.add_argument("--data", metavar="JSON", help="a JSON object handed to the tool with the answer")
    data.add_argument("--data-file", metavar="PATH", help="the same, read from a file (- for stdin)")
    p.add_argument("--handle", metavar="H", help="the suspended handle, when the id is open on several")
    p.add_argument("--no-wait", action="store_true", help="return once accepted, not when the agent settles")


def parse_data(text: str | None, flag: str = "--data") -> dict[str, Any] | None:
    """``--data`` as an object; not JSON, or JSON that is not an object, is a usage error."""
    if text is None:
        return None
    try:
        value: Any = json.loads(text)
    except ValueError as exc:
        raise CliError(Exit.USAGE, f"{flag} is not valid JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise CliError(Exit.USAGE, f"{flag} must be a JSON object ({{...}}), got {type(value).__name__}")
    return value


def read_text(path: str, flag: str) -> str:
    """The text of ``path`` (``-``: stdin); an unreadable file is a usage error."""
    if path == "-":
        return sys.stdin.read()
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(Exit.USAGE, f"{flag} {path}: {getattr(exc, 'strerror', None) or exc}") from exc


def data_of(ns: argparse.Namespace) -> dict[str, Any] | None:
    if ns.data_file is not None:
        return parse_data(read_text(ns.data_file, "--data-file"), "--data-file")
    return parse_data(ns.data)


def answer(conn: Connection, ns: argparse.Namespace) -> int:
    data = data_of(ns)
    runtime, handle = (ns.runtime, ns.handle or "") if ns.runtime else locate(conn, ns.request_id, ns.handle)
    return send(conn, ns, runtime, handle, data, accept_changed=False)


def resume(conn: Connection, ns: argparse.Namespace) -> int:
    data = data_of(ns)
    return send(conn, ns, ns.runtime, ns.handle or "", data, accept_changed=ns.accept_changed_definition,
                upgrade=ns.upgrade)


def send(conn: Connection, ns: argparse.Namespace, runtime: str, handle: str,
         data: dict[str, Any] | None, *, accept_changed: bool, upgrade: bool = False) -> int:
    """One Resume, its reply printed; exit 0 when this call answered the request."""
    reason = ns.reason or ("" if ns.approve else "declined")
    reply_answer = Answer(id=ns.request_id, ok=bool(ns.approve), data=data, reason=reason)
    try:
        reply = conn.call(conn.daemon.resume, runtime, reply_answer, handle or None, ns.no_wait,
                          accept_changed_definition=accept_changed, upgrade=upgrade)
    except CliError as err:
        if err.message.startswith("DEADLINE_EXCEEDED"):  # Resume waits for the agent to settle
            raise CliError(err.code, f"{err.message}; the answer may have been accepted while the agent "
                                     "was still working: see `inspect`, or answer with --no-wait") from err
        if err.message.startswith("FAILED_PRECONDITION") and _NO_LONGER_OPEN in err.message:
            raise CliError(Exit.NOT_FOUND, f"{err.message} (the request is no longer open)") from err
        raise
    if ns.json:
        render.out(render.dumps({"runtime_id": runtime, **render.to_json(reply)}), end="")
    if reply.duplicate:
        raise CliError(Exit.NOT_FOUND, f"request {ns.request_id!r} in runtime {runtime!r} was already "
                                       "answered so; nothing changed (the request is no longer open)")
    if ns.json:
        return Exit.OK
    verb = "approved" if ns.approve else "declined"
    render.out(f"{verb} {render.visible(ns.request_id)} in runtime {render.visible(runtime)}")
    if reply.result is not None and reply.handle:
        render.out(render.fit(render.result_line(reply.handle, reply.result)))
    return Exit.OK


def locate(conn: Connection, request_id: str, handle: str | None) -> tuple[str, str]:
    """The (runtime, handle) where ``request_id`` is open, from ListPending; none or several → CliError."""
    places = {(i.runtime_id, i.handle) for i in all_pending(conn) if i.request.id == request_id}
    if handle:
        places = {p for p in places if p[1] == handle}
    if not places:
        raise CliError(Exit.NOT_FOUND, f"no open request {request_id!r} in any runtime this caller may see "
                                       "(answered already? keyed runtime: pass --runtime-key)")
    runtimes = sorted({rt for rt, _ in places})
    if len(runtimes) > 1:
        raise CliError(Exit.AMBIGUOUS, f"request {request_id!r} is open in {len(runtimes)} runtimes "
                                       f"({', '.join(runtimes)}): name one with --runtime")
    if len(places) > 1:
        handles = sorted(h for _, h in places)
        raise CliError(Exit.AMBIGUOUS, f"request {request_id!r} is open on {len(handles)} handles of runtime "
                                       f"{runtimes[0]} ({', '.join(handles)}): name one with --handle")
    return next(iter(places))
