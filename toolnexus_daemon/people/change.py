"""The commands that change things: ``new``, ``spawn``, ``wake``, ``post``, ``interrupt``, ``close``
and ``shutdown`` — one RPC each, its reply as a line for people or JSON for scripts.

``new FILE`` reads a registry file: JSON holding a ``NewRequest`` in the proto's JSON mapping
(``{"agents": [...], "llm": {...}, "options": {...}}``, field names in snake_case or camelCase),
or just an agent (an ``AgentDef`` object) or a list of agents. YAML is not read (the daemon
carries no YAML parser): convert it first, for example with ``yq -o json``. A file that does
not parse, or names a field the proto does not have, is a usage error naming the problem, and
nothing is sent. Texts that may be long (a prompt, a message) can come from stdin with ``-``.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from google.protobuf import json_format

from ..api._gen import runtime_pb2 as pb
from . import render
from .answer import read_text
from .connect import Connection
from .exitcodes import CliError, Exit


def _text(value: str, flag: str) -> str:
    """``value`` itself, or stdin for ``-``."""
    return read_text("-", flag) if value == "-" else value


def _wait_ms(ns: argparse.Namespace) -> int:
    if ns.wait is None:
        return 0
    if ns.wait <= 0:
        raise CliError(Exit.USAGE, "--wait must be a number of seconds > 0")
    return int(ns.wait * 1000)


def _timeout(conn: Connection, wait_ms: int) -> float:
    """A call that waits for a turn may take that long plus the usual time for a call."""
    return conn.timeout + wait_ms / 1000


def registry_request(path: str) -> pb.NewRequest:
    """The ``NewRequest`` a registry file describes (see the module docstring)."""
    text = read_text(path, "FILE")
    if path.lower().endswith((".yaml", ".yml")):
        raise CliError(Exit.USAGE, f"{path}: registry files are JSON (the daemon reads no YAML); "
                                   "convert it first, e.g. `yq -o json . FILE > FILE.json`")
    try:
        value: Any = json.loads(text)
    except ValueError as exc:
        raise CliError(Exit.USAGE, f"{path} is not valid JSON: {exc}") from exc
    if isinstance(value, list) or (isinstance(value, dict) and "name" in value and "agents" not in value):
        value = {"agents": value if isinstance(value, list) else [value]}
    if not isinstance(value, dict):
        raise CliError(Exit.USAGE, f"{path}: want a JSON object (a NewRequest or an agent) or a list of "
                                   f"agents, got {type(value).__name__}")
    try:
        return json_format.ParseDict(value, pb.NewRequest())
    except json_format.ParseError as exc:
        raise CliError(Exit.USAGE, f"{path}: {exc}") from exc


def new(conn: Connection, ns: argparse.Namespace) -> int:
    request = registry_request(ns.file)
    if ns.runtime_id:
        request.runtime_id = ns.runtime_id
    if ns.runtime_key and not request.runtime_key:
        request.runtime_key = ns.runtime_key  # a key given to the command keys the runtime it creates
    reply = conn.call(conn.stub.New, request)
    if ns.json:
        render.out(render.dumps(render.to_json(reply)), end="")
        return Exit.OK
    verb = "reattached to" if reply.reattached else "created"
    rid, root = render.visible(reply.runtime_id), render.visible(reply.root)
    render.out(f"{verb} runtime {rid} (root handle {root})")
    return Exit.OK


def spawn(conn: Connection, ns: argparse.Namespace) -> int:
    wait_ms = _wait_ms(ns)
    prompt = _text(ns.prompt, "--prompt") if ns.prompt else ""
    if wait_ms and not prompt:
        raise CliError(Exit.USAGE, "--wait needs --prompt: a spawned handle runs only once woken")
    request = pb.SpawnRequest(runtime_id=ns.runtime, parent=ns.parent or "", agent=ns.agent, prompt=prompt,
                              wait_ms=wait_ms)
    reply = conn.call(conn.stub.Spawn, request, timeout=_timeout(conn, wait_ms))
    if ns.json:
        render.out(render.dumps(render.to_json(reply)), end="")
        return Exit.OK
    woke = (" and woke it" + (" (queued behind its siblings)" if reply.queued else "")) if prompt else ""
    render.out(f"spawned {render.visible(reply.handle)}{woke}")
    if reply.HasField("result"):
        render.out(render.fit(render.result_line(reply.handle, reply.result)))
    return Exit.OK


def wake(conn: Connection, ns: argparse.Namespace) -> int:
    wait_ms = _wait_ms(ns)
    request = pb.WakeRequest(runtime_id=ns.runtime, handle=ns.handle, prompt=_text(ns.prompt, "PROMPT"),
                             wait_ms=wait_ms, upgrade=ns.upgrade)
    reply = conn.call(conn.stub.Wake, request, timeout=_timeout(conn, wait_ms))
    if ns.json:
        render.out(render.dumps(render.to_json(reply)), end="")
        return Exit.OK
    render.out(f"{'queued a wake of' if reply.queued else 'woke'} {render.visible(ns.handle)}")
    if reply.HasField("result"):
        render.out(render.fit(render.result_line(ns.handle, reply.result)))
    return Exit.OK


def post(conn: Connection, ns: argparse.Namespace) -> int:
    item = pb.InboxItem(text=_text(ns.text, "TEXT"), channel=ns.channel or "")
    setattr(item, "from", ns.sender or "")  # `from` is a Python keyword
    reply = conn.call(conn.stub.Post, pb.PostRequest(runtime_id=ns.runtime, handle=ns.handle, item=item))
    if ns.json:
        render.out(render.dumps(render.to_json(reply)), end="")
        return Exit.OK
    render.out(f"posted to {render.visible(ns.handle)}: item {reply.position} of at most {reply.inbox_cap} "
               "in its inbox (read at its next wake)")
    return Exit.OK


def interrupt(conn: Connection, ns: argparse.Namespace) -> int:
    reply = conn.call(conn.stub.Interrupt, pb.InterruptRequest(runtime_id=ns.runtime, handle=ns.handle))
    if ns.json:
        render.out(render.dumps(render.to_json(reply)), end="")
        return Exit.OK
    what = (f"cancelled its request {render.visible(reply.cancelled_request)}" if reply.cancelled_request
            else "aborted its turn")
    restored = (f"; {render.plural(reply.inbox_restored, 'inbox item')} put back"
                if reply.inbox_restored else "")
    was = render.visible(reply.from_state)
    render.out(f"interrupted {render.visible(ns.handle)} ({was}): {what}{restored}")
    return Exit.OK


def close(conn: Connection, ns: argparse.Namespace) -> int:
    reply = conn.call(conn.stub.Close, pb.CloseRequest(runtime_id=ns.runtime, handle=ns.handle))
    if ns.json:
        render.out(render.dumps({"runtime_id": ns.runtime, "handle": ns.handle, **render.to_json(reply)}),
                   end="")
        return Exit.OK
    render.out(f"closed {render.visible(ns.handle)} (and its subtree)")
    return Exit.OK


def shutdown(conn: Connection, ns: argparse.Namespace) -> int:
    if ns.daemon == bool(ns.runtime):
        raise CliError(Exit.USAGE, "name a RUNTIME to shut down, or --daemon to stop the whole daemon")
    if ns.daemon and ns.purge:
        raise CliError(Exit.USAGE, "--purge deletes one runtime: it does not go with --daemon")
    if ns.purge and not ns.yes:
        raise CliError(Exit.USAGE, f"--purge deletes runtime {ns.runtime!r} and everything it stored, for "
                                   "good: add --yes to do it")
    request = (pb.ShutdownRequest(daemon=True) if ns.daemon
               else pb.ShutdownRequest(runtime_id=ns.runtime, purge=ns.purge))
    conn.call(conn.stub.Shutdown, request)
    if ns.json:
        render.out(render.dumps({"runtime_id": ns.runtime or "", "purged": bool(ns.purge),
                                 "daemon": bool(ns.daemon)}), end="")
        return Exit.OK
    if ns.daemon:
        render.out(f"the daemon at {render.visible(conn.target)} is stopping")
    else:
        done = "purged: every handle closed, everything stored deleted" if ns.purge \
            else "shut down: every handle closed, its final state kept"
        render.out(f"runtime {render.visible(ns.runtime)} {done}")
    return Exit.OK
