"""The exit codes of the people commands, which scripts can rely on, and the one error they raise.

A failed call (the Python client's ``ToolnexusError``) is translated here, once, into a code that says what a
script can do about it: retry later (unreachable), fix its credentials
(unauthenticated, not allowed), or look again (not found, ambiguous).
"""

from __future__ import annotations

import textwrap
from enum import IntEnum

import grpc

from toolnexus_client import ToolnexusError


class Exit(IntEnum):
    """Documented in ``toolnexus-daemon COMMAND --help`` and docs/cli.md; never renumbered."""

    OK = 0
    ERROR = 1  # the daemon refused the call, or anything not listed below
    USAGE = 2  # the command line itself is wrong (unknown flag, bad --data JSON, ...)
    NOT_FOUND = 3  # no such runtime, handle or open request
    UNREACHABLE = 4  # no daemon answered at the target (down, wrong address, shutting down, timed out)
    UNAUTHENTICATED = 5  # missing or wrong bearer token
    NOT_ALLOWED = 6  # missing or wrong runtime key
    AMBIGUOUS = 7  # the request id is open in several places: name one with --runtime / --handle


EXIT_HELP = """exit codes:
  0  ok                1  error (the daemon refused the call)      2  usage (bad flags or --data)
  3  not found         4  daemon unreachable (or timed out)         5  unauthenticated (token)
  6  not allowed (runtime key)                 7  ambiguous request id (add --runtime / --handle)
"""

# what each code means for one command, beyond the table above (docs/cli.md lists the same)
COMMAND_EXITS: dict[str, dict[int, str]] = {
    "runtimes": {},
    "pending": {2: "--older-than is not a duration", 3: "--runtime names no runtime"},
    "inspect": {3: "no such runtime or handle"},
    "versions": {3: "no such runtime"},
    "events": {0: "also on Ctrl-C with --follow", 2: "--after is negative", 3: "no such runtime",
               4: "also after 30 failed reopens of a followed stream"},
    "answer": {1: "the daemon refused the answer (e.g. the agent's definition changed since it asked)",
               2: "bad --data / --data-file",
               3: "no such runtime, or the request is not open: never asked, cancelled, or answered "
                  "already (the same answer or another; the message says which)",
               7: "the request id is open in several runtimes or handles"},
    "resume": {1: "the daemon refused the answer (the definition changed: see "
                  "--accept-changed-definition)", 2: "bad --data / --data-file",
               3: "as for answer: no such runtime, or the request is not open",
               4: "timed out waiting for the agent (the answer may have been accepted; or --no-wait)"},
    "new": {1: "the daemon refused the registry (INVALID_ARGUMENT names the field)",
            2: "FILE unreadable, not JSON, or a field the proto does not have"},
    "spawn": {1: "a budget or limit refused it (maxDepth, maxChildren)", 2: "--wait without --prompt",
              3: "no such runtime, parent handle or agent"},
    "wake": {1: "the handle is closed", 3: "no such runtime or handle"},
    "post": {1: "the handle's inbox is full, or the handle is closed", 3: "no such runtime or handle"},
    "interrupt": {1: "the handle is idle or closed: nothing to interrupt", 3: "no such runtime or handle"},
    "close": {3: "no such runtime or handle"},
    "shutdown": {2: "neither RUNTIME nor --daemon, or --purge without --yes", 3: "no such runtime"},
}


def exit_help(command: str) -> str:
    """The ``--help`` epilog of ``command``: the shared table, then what the codes mean for it."""
    own = COMMAND_EXITS.get(command, {})
    lines = [textwrap.fill(why, 96, initial_indent=f"  {code}  ", subsequent_indent="     ")
             for code, why in sorted(own.items())]
    return EXIT_HELP + (f"for {command}:\n" + "\n".join(lines) + "\n" if lines else "")

_BY_STATUS = {
    grpc.StatusCode.NOT_FOUND: Exit.NOT_FOUND,
    grpc.StatusCode.UNAVAILABLE: Exit.UNREACHABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED: Exit.UNREACHABLE,
    grpc.StatusCode.UNAUTHENTICATED: Exit.UNAUTHENTICATED,
    grpc.StatusCode.PERMISSION_DENIED: Exit.NOT_ALLOWED,
}


class CliError(Exception):
    """Ends a command with ``code`` after printing ``message`` to stderr."""

    def __init__(self, code: Exit, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def from_client_error(err: ToolnexusError, target: str) -> CliError:
    """The CliError of a failed call: its exit code by status, the daemon's own words as message."""
    code = err.status
    details = err.message
    if code is grpc.StatusCode.UNAVAILABLE:
        details = f"no daemon answered at {target}: {details}"
    return CliError(_BY_STATUS.get(code, Exit.ERROR), f"{code.name}: {details}")
