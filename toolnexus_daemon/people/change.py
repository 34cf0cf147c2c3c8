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

from toolnexus_client import TaskResult

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


def registry_request(path: str) -> dict[str, Any]:
    """The ``NewRequest`` a registry file describes, in the proto's JSON mapping (see the module
    docstring); whether its fields are the proto's is checked by the client before it sends."""
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
    return value


def new(conn: Connection, ns: argparse.Namespace) -> int:
    definition = registry_request(ns.file)
    try:
        # a key given to the command keys the runtime it creates (unless the file names one)
        reply = conn.call(conn.daemon.new_runtime, definition, ns.runtime_id or None, ns.runtime_key or None)
    except ValueError as exc:  # a field the proto does not have: refused before anything is sent
        raise CliError(Exit.USAGE, f"{ns.file}: {exc}") from exc
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
    reply = conn.call(conn.daemon.spawn, ns.runtime, ns.parent or "", ns.agent, prompt=prompt or None,
                      wait=ns.wait if wait_ms else None, timeout=_timeout(conn, wait_ms))
    if ns.json:
        woken = {"handle": reply.handle, "queued": reply.queued, "result": _result(reply.result)}
        render.out(render.dumps(woken), end="")
        return Exit.OK
    woke = (" and woke it" + (" (queued behind its siblings)" if reply.queued else "")) if prompt else ""
    render.out(f"spawned {render.visible(reply.handle)}{woke}")
    if reply.result is not None:
        render.out(render.fit(render.result_line(reply.handle, reply.result)))
    return Exit.OK


def _result(result: TaskResult | None) -> dict[str, Any] | None:
    return None if result is None else render.to_json(result)


def wake(conn: Connection, ns: argparse.Namespace) -> int:
    wait_ms = _wait_ms(ns)
    reply = conn.call(conn.daemon.wake, ns.runtime, ns.handle, _text(ns.prompt, "PROMPT"),
                      wait=ns.wait if wait_ms else None, upgrade=ns.upgrade, timeout=_timeout(conn, wait_ms))
    if ns.json:
        render.out(render.dumps({"queued": reply.queued, "result": _result(reply.result)}), end="")
        return Exit.OK
    render.out(f"{'queued a wake of' if reply.queued else 'woke'} {render.visible(ns.handle)}")
    if reply.result is not None:
        render.out(render.fit(render.result_line(ns.handle, reply.result)))
    return Exit.OK


def post(conn: Connection, ns: argparse.Namespace) -> int:
    # empty sender and channel: the daemon's defaults
    reply = conn.call(conn.daemon.post, ns.runtime, ns.handle, _text(ns.text, "TEXT"), ns.sender or "",
                      ns.channel or "")
    if ns.json:
        render.out(render.dumps(render.to_json(reply)), end="")
        return Exit.OK
    render.out(f"posted to {render.visible(ns.handle)}: item {reply.position} of at most {reply.inbox_cap} "
               "in its inbox (read at its next wake)")
    return Exit.OK


def interrupt(conn: Connection, ns: argparse.Namespace) -> int:
    reply = conn.call(conn.daemon.interrupt, ns.runtime, ns.handle)
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
    conn.call(conn.daemon.close_handle, ns.runtime, ns.handle)
    if ns.json:
        render.out(render.dumps({"runtime_id": ns.runtime, "handle": ns.handle}), end="")
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
    if ns.daemon:
        conn.call(conn.daemon.shutdown_daemon)
    else:
        conn.call(conn.daemon.shutdown_runtime, ns.runtime, ns.purge)
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
