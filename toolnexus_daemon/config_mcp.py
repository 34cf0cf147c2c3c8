"""The operator's MCP server file (``--mcp-config FILE``, docs/mcp.md).

The file has the form desktop MCP hosts use::

    {"mcpServers": {"files": {"command": "python", "args": ["server.py"], "env": {"K": "v"}},
                    "search": {"url": "https://search.example/mcp", "headers": {"Authorization": "..."}}}}

An agent's ``McpServer`` without a ``url`` is looked up here by name. Only here may a stdio server
(a command the daemon starts) be named, so no caller of ``New`` can make the daemon run a program.
The file is read once, at start; a malformed one stops the daemon with a message naming the entry.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,32}$")
# "" and "2025-11-25": the initialize handshake; "auto": the newest protocol the server speaks
PROTOCOLS = ("", "2025-11-25", "auto")
MAX_FILE_BYTES = 1 << 20


@dataclass(frozen=True)
class McpConfigServer:
    """One entry: a stdio command (``command``, ``args``, ``env``) or a URL (``url``, ``headers``)."""

    command: str = ""
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    # "auto": the 2026-07-28 protocol when the server speaks it (elicitations come as input-required
    # results); "" = the initialize handshake (2025-11-25: elicitations arrive on the open call)
    protocol: str = ""

    @property
    def stdio(self) -> bool:
        return bool(self.command)


@dataclass(frozen=True)
class McpConfig:
    """The servers of ``--mcp-config`` by name."""

    servers: dict[str, McpConfigServer] = field(default_factory=dict)
    path: str = ""


def add_flags(g: argparse._ArgumentGroup, env: Mapping[str, str]) -> None:
    g.add_argument(
        "--mcp-config",
        type=Path,
        default=env.get("TOOLNEXUS_MCP_CONFIG") or None,
        metavar="FILE",
        help='MCP servers agents may name without a url: {"mcpServers": {NAME: {command, args, env} '
        "| {url, headers}}} (env TOOLNEXUS_MCP_CONFIG; default none)",
    )


def load_flag(parser: argparse.ArgumentParser, path: Path | None) -> McpConfig | None:
    """The parsed ``--mcp-config``, or a parser error naming what is wrong with it."""
    if path is None:
        return None
    try:
        raw = path.read_bytes()
    except OSError as exc:
        parser.error(f"--mcp-config {path}: cannot read it: {exc.strerror or exc}")
    if len(raw) > MAX_FILE_BYTES:
        parser.error(f"--mcp-config {path}: {len(raw)} bytes; the limit is {MAX_FILE_BYTES}")
    try:
        return parse(json.loads(raw), str(path))
    except (ValueError, RecursionError) as exc:
        parser.error(f"--mcp-config {path}: {exc}")


def parse(doc: object, path: str = "") -> McpConfig:
    """An ``McpConfig`` from the file's JSON; ValueError naming the first bad entry."""
    if not isinstance(doc, dict) or not isinstance(doc.get("mcpServers"), dict):
        raise ValueError('want a JSON object with an "mcpServers" object')
    servers: dict[str, McpConfigServer] = {}
    for name, entry in doc["mcpServers"].items():
        if not NAME_RE.match(name):
            raise ValueError(f'server name "{name[:64]}" must be 1-32 letters, digits, "_" or "-"')
        servers[name] = _entry(name, entry)
    return McpConfig(servers, path)


def _entry(name: str, entry: object) -> McpConfigServer:
    if not isinstance(entry, dict):
        raise ValueError(f'server "{name}" must be an object')
    command, url = entry.get("command"), entry.get("url")
    if bool(command) == bool(url):
        raise ValueError(
            f'server "{name}" needs exactly one of "command" (stdio) and "url" (streamable HTTP)'
        )
    if url is not None and not (isinstance(url, str) and url.startswith(("http://", "https://"))):
        raise ValueError(f'server "{name}": "url" must be an http:// or https:// URL')
    if command is not None and not isinstance(command, str):
        raise ValueError(f'server "{name}": "command" must be a string')
    args = entry.get("args") or []
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise ValueError(f'server "{name}": "args" must be a list of strings')
    protocol = entry.get("protocol") or ""
    if protocol not in PROTOCOLS:
        raise ValueError(f'server "{name}": "protocol" must be "2025-11-25" (the default) or "auto"')
    return McpConfigServer(
        command=command or "",
        args=tuple(args),
        env=_strings(name, "env", entry),
        url=url or "",
        headers=_strings(name, "headers", entry),
        protocol=protocol,
    )


def _strings(name: str, key: str, entry: dict[str, object]) -> dict[str, str]:
    value = entry.get(key) or {}
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise ValueError(f'server "{name}": "{key}" must be an object of strings')
    return dict(value)
