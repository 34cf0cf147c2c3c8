"""The command line for people: ``runtimes``, ``pending``, ``inspect``, ``answer`` and ``events``.

A gRPC client of the daemon like any other (docs/protocol.md §10): it speaks
through the generated stubs of ``api/_gen`` and nothing else of the daemon
(the import contract in pyproject.toml keeps engine, store and server out), so
it behaves exactly as a remote caller would. ``main`` is what
``toolnexus-daemon COMMAND`` dispatches to.
"""

from .commands import COMMANDS, main

__all__ = ["COMMANDS", "main"]
