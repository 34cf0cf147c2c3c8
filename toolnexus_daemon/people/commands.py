"""Parse a people command's flags, connect, run it, and turn every failure into its exit code.

Each command is a function ``(Connection, Namespace) -> int``; this module owns
the parsers (so ``--help`` documents flags and exit codes in one place) and the
translation of ``CliError`` and Ctrl-C into exit codes and one line on stderr.
What argparse itself prints (usage errors quote the command line, which may have been pasted
from an agent's output) goes through ``render.visible`` too.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from . import change, render
from .answer import add_answer_flags, answer, resume
from .connect import Connection, add_connection_flags
from .events import events
from .exitcodes import CliError, Exit, exit_help
from .inspect import inspect
from .listing import pending, runtimes
from .versions import versions

Command = Callable[[Connection, argparse.Namespace], int]

COMMANDS: dict[str, tuple[str, Command]] = {
    "runtimes": ("list the runtimes with their handle counts by state and open requests", runtimes),
    "pending": ("list the open requests (suspensions waiting for an answer), oldest first", pending),
    "inspect": ("draw a runtime's handle tree with states, usage and what each handle waits on", inspect),
    "versions": ("list a runtime's registry versions with the handles pinned to each", versions),
    "answer": ("approve or decline an open request by its id (the runtime is found for you)", answer),
    "events": ("print a runtime's event log; --follow keeps printing new events", events),
    "new": ("create a runtime from a registry file (JSON), or reattach to one", change.new),
    "spawn": ("spawn a handle of an agent under a parent (root by default); --prompt also wakes it",
              change.spawn),
    "wake": ("wake a handle with a prompt; --wait S prints the turn's result", change.wake),
    "post": ("post a message to a handle's inbox (read at its next wake)", change.post),
    "interrupt": ("abort a handle's running turn, or cancel the request it waits on", change.interrupt),
    "close": ("close a handle and its subtree", change.close),
    "shutdown": ("shut down a runtime (--purge deletes it), or stop the whole daemon (--daemon)",
                 change.shutdown),
    "resume": ("answer a request in a named runtime; --accept-changed-definition feeds the answer to a "
               "changed tool", resume),
}


CHANGES = ("new", "spawn", "wake", "post", "interrupt", "close", "shutdown")


class _Parser(argparse.ArgumentParser):
    """argparse, with what it prints made visible (its errors quote the command line)."""

    def _print_message(self, message: str, file: Any = None) -> None:
        if message:
            (file or sys.stderr).write(render.visible_lines(message))


def _add_wait(p: argparse.ArgumentParser) -> None:
    p.add_argument("--wait", type=float, metavar="S",
                   help="also wait up to S seconds for the turn to settle and print its result")


def _add_arguments(name: str, p: argparse.ArgumentParser) -> None:
    if name == "pending":
        p.add_argument("--runtime", metavar="R", help="only this runtime")
        p.add_argument("--kind", metavar="K", help="only requests of this kind (approval, input, ...)")
        p.add_argument("--older-than", metavar="D",
                       help="only requests waiting at least this long (90s, 15m, 1h30m, 2d)")
    elif name == "versions":
        p.add_argument("runtime", metavar="RUNTIME")
    elif name == "inspect":
        p.add_argument("runtime", metavar="RUNTIME")
        p.add_argument("handle", metavar="HANDLE", nargs="?", help="draw only this handle's subtree")
    elif name == "answer":
        p.add_argument("request_id", metavar="REQUEST_ID")
        add_answer_flags(p)
        p.add_argument("--runtime", metavar="R", help="its runtime (default: found via ListPending)")
    elif name == "resume":
        p.add_argument("runtime", metavar="RUNTIME")
        p.add_argument("request_id", metavar="REQUEST_ID")
        add_answer_flags(p)
        p.add_argument("--accept-changed-definition", action="store_true",
                       help="answer even though the suspended tool's definition changed since it asked")
        p.add_argument("--upgrade", action="store_true",
                       help="move the handle to the runtime's latest registry version (refused when the "
                            "suspended tool changed there, unless --accept-changed-definition)")
    elif name == "events":
        p.add_argument("runtime", metavar="RUNTIME")
        p.add_argument("--follow", "-f", action="store_true", help="keep printing new events until Ctrl-C")
        p.add_argument("--after", type=int, default=0, metavar="N", help="only events with seq > N")
        p.add_argument("--handle", metavar="H", help="only this handle's events")
        p.add_argument("--type", action="append", metavar="T", help="only this event type (repeatable)")
        p.add_argument("--idle", type=float, default=1.0, metavar="S",
                       help="without --follow: stop once no event came for S seconds (default %(default)s)")
    elif name in CHANGES:
        _add_change_arguments(name, p)


def _add_change_arguments(name: str, p: argparse.ArgumentParser) -> None:
    if name == "new":
        p.add_argument("file", metavar="FILE", help="the registry: a JSON NewRequest, agent or list of "
                                                    "agents (- for stdin)")
        p.add_argument("--runtime-id", metavar="R", help="the runtime's id (an existing one: reattach)")
        return
    if name == "shutdown":
        p.add_argument("runtime", metavar="RUNTIME", nargs="?")
        p.add_argument("--purge", action="store_true", help="delete the runtime and all it stored")
        p.add_argument("--yes", action="store_true", help="confirm --purge")
        p.add_argument("--daemon", action="store_true", help="stop the whole daemon, as SIGTERM does")
        return
    p.add_argument("runtime", metavar="RUNTIME")
    if name == "spawn":
        p.add_argument("agent", metavar="AGENT")
        p.add_argument("--parent", metavar="H", help="the parent handle (default: root)")
        p.add_argument("--prompt", metavar="TEXT", help="also wake the new handle with this (- for stdin)")
        _add_wait(p)
        return
    p.add_argument("handle", metavar="HANDLE")
    if name == "wake":
        p.add_argument("prompt", metavar="PROMPT", help="what to do (- for stdin)")
        p.add_argument("--upgrade", action="store_true",
                       help="move the handle (and its idle subtree) to the latest registry version first")
        _add_wait(p)
    elif name == "post":
        p.add_argument("text", metavar="TEXT", help="the message (- for stdin)")
        p.add_argument("--from", dest="sender", metavar="WHO", help="who it is from")
        p.add_argument("--channel", metavar="C", help="the channel it came on")


def parser(name: str, env: Mapping[str, str]) -> argparse.ArgumentParser:
    p = _Parser(prog=f"toolnexus-daemon {name}", description=COMMANDS[name][0],
                epilog=exit_help(name), formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_arguments(name, p)
    add_connection_flags(p, env)
    return p


def main(name: str, argv: Sequence[str], env: Mapping[str, str]) -> int:
    ns = parser(name, env).parse_args(list(argv))  # a usage error exits 2 here, as argparse does
    if name == "events" and ns.after < 0:
        return _fail(name, CliError(Exit.USAGE, "--after must be >= 0"))
    try:
        conn = Connection(ns, env)
    except CliError as err:
        return _fail(name, err)
    try:
        return COMMANDS[name][1](conn, ns)
    except CliError as err:
        return _fail(name, err)
    except KeyboardInterrupt:
        return Exit.OK if name == "events" else Exit.ERROR
    except BrokenPipeError:
        # `| head`: the reader has what it wanted; point stdout at nothing so the exit flush is quiet
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return Exit.OK
    finally:
        conn.close()


def _fail(name: str, err: CliError) -> int:
    render.err(f"toolnexus-daemon {name}: {err.message}")
    return int(err.code)
