"""The command line for people: ``runtimes``, ``pending``, ``inspect``, ``answer`` and ``events``
to look and answer; ``new``, ``spawn``, ``wake``, ``post``, ``interrupt``, ``close``, ``shutdown``
and ``resume`` to change things (docs/cli.md).

A client of the daemon like any other (docs/protocol.md §10): it drives the
daemon through the public Python client (``toolnexus_client.Daemon``, which
calls any runtime by its id) and nothing else of the daemon — the import
contracts in pyproject.toml keep engine, store, server and the daemon's
generated stubs out — so it behaves exactly as a remote caller would, and a fix
to the client is a fix here. Every line it prints goes through ``render``
(control characters shown, not obeyed). ``main`` is what ``toolnexus-daemon COMMAND`` dispatches to.
"""

from .commands import COMMANDS, main

__all__ = ["COMMANDS", "main"]
