"""The MCP server flags: ``--mcp-listen HOST:PORT`` and ``--mcp-expose RUNTIME_ID`` (repeatable).

Kept beside ``config`` (which calls it). The rules:

* both or neither: a listener with nothing exposed, or runtimes exposed with no listener, is refused;
* ``--mcp-listen PORT`` or ``:PORT`` means ``127.0.0.1:PORT``;
* a non-loopback host needs TLS (``--tls-cert``/``--tls-key``, which this listener uses too) or
  ``--insecure``, as the answers listener does; the gRPC listener's bearer token guards it either way;
* each runtime id is a runtime id (``[A-Za-z0-9_.-]``, at most 128) and named once.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Mapping
from dataclasses import dataclass

from .config_listen import is_loopback, listen_address

RUNTIME_ID = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")


@dataclass(frozen=True)
class McpServe:
    """Where the MCP listener binds and which runtimes' agents it offers as tools."""

    listen: str
    expose: tuple[str, ...]

    @property
    def host(self) -> str:
        return self.listen.rpartition(":")[0].strip("[]")


def add_flags(g: argparse._ArgumentGroup, env: Mapping[str, str]) -> None:
    g.add_argument("--mcp-listen", default=env.get("TOOLNEXUS_MCP_LISTEN", ""), metavar="HOST:PORT",
                   help="serve the exposed runtimes' agents as MCP tools over streamable HTTP at /mcp; a "
                        "bare PORT means 127.0.0.1:PORT (env TOOLNEXUS_MCP_LISTEN; default off)")
    g.add_argument("--mcp-expose", action="append", default=None, metavar="RUNTIME_ID",
                   help="offer every agent of this runtime as an MCP tool (repeatable; env "
                        "TOOLNEXUS_MCP_EXPOSE, comma-separated)")
    g.set_defaults(mcp_expose_env=env.get("TOOLNEXUS_MCP_EXPOSE", ""))


def mcp(parser: argparse.ArgumentParser, ns: argparse.Namespace, tls: bool,
        insecure: bool) -> McpServe | None:
    """The checked MCP server settings, or None when no listener is asked for."""
    listen = ns.mcp_listen.strip()
    expose = [r.strip() for r in (ns.mcp_expose or ns.mcp_expose_env.split(",")) if r.strip()]
    if not listen:
        if expose:
            parser.error("--mcp-expose needs --mcp-listen HOST:PORT (the listener MCP clients connect to)")
        return None
    if not expose:
        parser.error("--mcp-listen needs at least one --mcp-expose RUNTIME_ID (the runtimes whose agents "
                     "it offers as tools)")
    for rid in expose:
        if not RUNTIME_ID.match(rid):
            parser.error(f"--mcp-expose {rid[:140]!r}: a runtime id is 1 to 128 of A-Z a-z 0-9 _ . -")
    if len(set(expose)) != len(expose):
        parser.error(f"--mcp-expose names a runtime twice: {', '.join(sorted(expose))}")
    listen = listen_address(parser, "--mcp-listen", listen, "127.0.0.1:8765")
    host = listen.rpartition(":")[0].strip("[]")
    if not is_loopback(host) and not tls and not insecure:
        parser.error(f"--mcp-listen {listen}: a non-loopback address needs TLS (--tls-cert/--tls-key); "
                     "pass --insecure to serve MCP in plaintext there anyway")
    return McpServe(listen, tuple(expose))

