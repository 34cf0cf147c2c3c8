"""Parse a people command's flags, connect, run it, and turn every failure into its exit code.

Each command is a function ``(Connection, Namespace) -> int``; this module owns
the parsers (so ``--help`` documents flags and exit codes in one place) and the
translation of ``CliError`` and Ctrl-C into exit codes and one line on stderr.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Mapping, Sequence

from .answer import answer
from .connect import Connection, add_connection_flags
from .events import events
from .exitcodes import EXIT_HELP, CliError, Exit
from .inspect import inspect
from .listing import pending, runtimes

Command = Callable[[Connection, argparse.Namespace], int]

COMMANDS: dict[str, tuple[str, Command]] = {
    "runtimes": ("list the runtimes with their handle counts by state and open requests", runtimes),
    "pending": ("list the open requests (suspensions waiting for an answer), oldest first", pending),
    "inspect": ("draw a runtime's handle tree with states, usage and what each handle waits on", inspect),
    "answer": ("approve or decline an open request by its id (the runtime is found for you)", answer),
    "events": ("print a runtime's event log; --follow keeps printing new events", events),
}


def _add_arguments(name: str, p: argparse.ArgumentParser) -> None:
    if name == "pending":
        p.add_argument("--runtime", metavar="R", help="only this runtime")
        p.add_argument("--kind", metavar="K", help="only requests of this kind (approval, input, ...)")
    elif name == "inspect":
        p.add_argument("runtime", metavar="RUNTIME")
        p.add_argument("handle", metavar="HANDLE", nargs="?", help="draw only this handle's subtree")
    elif name == "answer":
        p.add_argument("request_id", metavar="REQUEST_ID")
        choice = p.add_mutually_exclusive_group(required=True)
        choice.add_argument("--approve", action="store_true", help="answer ok")
        choice.add_argument("--decline", action="store_true", help="answer not ok")
        p.add_argument("--reason", metavar="R", help="why (default for --decline: declined)")
        p.add_argument("--data", metavar="JSON", help="a JSON object handed to the tool with the answer")
        p.add_argument("--runtime", metavar="R", help="its runtime (default: found via ListPending)")
        p.add_argument("--handle", metavar="H",
                       help="the suspended handle, when the id is open on several")
        p.add_argument("--no-wait", action="store_true",
                       help="return once accepted, not when the agent settles")
    elif name == "events":
        p.add_argument("runtime", metavar="RUNTIME")
        p.add_argument("--follow", "-f", action="store_true", help="keep printing new events until Ctrl-C")
        p.add_argument("--after", type=int, default=0, metavar="N", help="only events with seq > N")
        p.add_argument("--handle", metavar="H", help="only this handle's events")
        p.add_argument("--type", action="append", metavar="T", help="only this event type (repeatable)")
        p.add_argument("--idle", type=float, default=1.0, metavar="S",
                       help="without --follow: stop once no event came for S seconds (default %(default)s)")


def parser(name: str, env: Mapping[str, str]) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=f"toolnexus-daemon {name}", description=COMMANDS[name][0],
                                epilog=EXIT_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
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
    print(f"toolnexus-daemon {name}: {err.message}", file=sys.stderr)
    return int(err.code)
