"""The command line for people: ``runtimes``, ``pending``, ``inspect``, ``answer`` and ``events``
to look and answer; ``new``, ``spawn``, ``wake``, ``post``, ``interrupt``, ``close``, ``shutdown``
and ``resume`` to change things (docs/cli.md).

A gRPC client of the daemon like any other (docs/protocol.md §10): it speaks
through the generated stubs of ``api/_gen`` and nothing else of the daemon
(the import contract in pyproject.toml keeps engine, store and server out), so
it behaves exactly as a remote caller would. It does not use the Python client
package (``toolnexus_client``): that is a separate distribution the daemon's
package does not depend on (and may not import, by contract), and its surface —
a registry of Python callables served by a worker — is not what one RPC per
command needs. Every line it prints goes through ``render`` (control characters
shown, not obeyed). ``main`` is what ``toolnexus-daemon COMMAND`` dispatches to.
"""

from .commands import COMMANDS, main

__all__ = ["COMMANDS", "main"]
