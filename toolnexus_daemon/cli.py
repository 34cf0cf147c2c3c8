"""The ``toolnexus-daemon`` command: ``serve``, ``health``, ``dev-model`` and the commands for people.

Only dispatches: flags are parsed by ``config`` (serve) and by the dev model
server's own ``main``; imports are deferred so ``dev-model`` starts without
loading gRPC or LMDB.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence

USAGE = """usage: toolnexus-daemon COMMAND [options]

commands:
  serve       run the gRPC sidecar (toolnexus-daemon serve --help)
  health      exit 0 if a daemon reports SERVING on grpc.health.v1 (for exec probes;
              toolnexus-daemon health --target unix:/run/toolnexus/daemon.sock)
  dev-model   serve the scripted OpenAI-compatible mock model and the demo approval webhook
              (toolnexus-daemon dev-model --listen 127.0.0.1:8099)

commands for people (toolnexus-daemon COMMAND --help; --json for scripts; docs/cli.md):
  runtimes    the runtimes, with handle counts by state and open requests
  pending     the open requests waiting for an answer, oldest first
  inspect     RUNTIME [HANDLE]: the handle tree with states, usage and what each waits on
  versions    RUNTIME: the registry versions, with the handles pinned to each
  answer      REQUEST_ID --approve|--decline [--reason R] [--data JSON]: answer an open request
  events      RUNTIME [--follow] [--after N]: the runtime's event log
  new         FILE [--runtime-id R]: create a runtime from a JSON registry file, or reattach
  spawn       RUNTIME AGENT [--parent H] [--prompt TEXT [--wait S]]: a new handle
  wake        RUNTIME HANDLE PROMPT [--wait S]: wake a handle
  post        RUNTIME HANDLE TEXT: a message to a handle's inbox
  interrupt   RUNTIME HANDLE: abort its turn, or cancel the request it waits on
  close       RUNTIME HANDLE: close a handle and its subtree
  shutdown    RUNTIME [--purge --yes] | --daemon: shut a runtime down, or the whole daemon
  resume      RUNTIME REQUEST_ID --approve|--decline [--data-file PATH|-]: answer in a named runtime
"""
PEOPLE = ("runtimes", "pending", "inspect", "versions", "answer", "events", "new", "spawn", "wake", "post",
          "interrupt", "close", "shutdown", "resume")


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    command, rest = (args[0], args[1:]) if args else ("", [])
    if command == "serve":
        from . import app, config

        return app.run(config.load(rest, os.environ))
    if command == "health":
        from .api.health_probe import main as health_main

        return health_main(rest, os.environ)
    if command == "dev-model":
        return _dev_model(rest)
    if command in PEOPLE:
        from .people import main as people_main

        return people_main(command, rest, os.environ)
    if command in ("-h", "--help", "help"):
        print(USAGE, end="")
        return 0
    if command in ("-V", "--version", "version"):
        from . import __version__

        print(f"toolnexus-daemon {__version__}")
        return 0
    print(USAGE + (f"\nunknown command {command!r}\n" if command else ""), file=sys.stderr, end="")
    return 2


DEVTOOLS = "toolnexus_devtools"
NO_DEVTOOLS = (f"toolnexus-daemon dev-model: the development tools ({DEVTOOLS}) are not installed here;\n"
               "they live beside the daemon in a source checkout, not in its runtime package.\n"
               "Run `make dev-model` from the checkout, or put the checkout on PYTHONPATH.\n")


def _dev_model(argv: list[str]) -> int:
    """Start the scripted model server, which is not part of the daemon's runtime package.

    Imported by name at run time (``importlib``), so the daemon package holds no import of
    it (the import contract in pyproject.toml checks that) and a runtime without it says how
    to get it instead of failing with a traceback.
    """
    try:
        server = importlib.import_module(f"{DEVTOOLS}.model_server")
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.split(".")[0] != DEVTOOLS:
            raise  # something the dev tools import is missing: show the real error
        print(NO_DEVTOOLS, file=sys.stderr, end="")
        return 2
    code: int = server.main(argv)
    return code


if __name__ == "__main__":
    sys.exit(main())
