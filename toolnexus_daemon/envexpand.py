"""``${NAME}`` expansion of configured header values (docs/protocol.md §3 and §7).

Secrets such as API tokens reach outgoing headers only through the
environment of the daemon, so an agent definition (which travels over gRPC
and is stored in LMDB) never holds them. Expanded values are secrets: callers
must never log them or put them into error messages.

The caller of ``New`` chooses where requests go, so it could point a webhook at
itself and read back whatever a header expands to: only variables the operator
allows (``--allow-env``) are expanded or named as ``api_key_env``. ``New``
refuses any other name, and the transports see only an allowed view of the
environment, so a runtime stored before the rule cannot read the rest either.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
# shorter values (e.g. "1", "json") are too common to mask without mangling text
_MIN_SECRET_CHARS = 6


@dataclass(frozen=True)
class EnvAllowList:
    """Names and ``PREFIX*`` patterns of the variables outgoing requests may use (default none)."""

    patterns: tuple[str, ...] = ()

    def permits(self, name: str) -> bool:
        return any(name.startswith(p[:-1]) if p.endswith("*") else name == p for p in self.patterns)

    def view(self, source: Mapping[str, str]) -> dict[str, str]:
        """The allowed part of ``source``: all a transport or an executor gets to read."""
        return {k: v for k, v in source.items() if self.permits(k)}


def referenced(headers: Mapping[str, str]) -> list[str]:
    """The ``${NAME}`` names in header values, in order, without repeats."""
    names = [name for value in headers.values() for name in _VAR.findall(value)]
    return list(dict.fromkeys(names))


def expand(value: str, env: Mapping[str, str] | None = None) -> str:
    """Replace each ``${NAME}`` with ``env[NAME]``, or '' when it is not set."""
    source = os.environ if env is None else env
    return _VAR.sub(lambda m: source.get(m.group(1), ""), value)


def expand_headers(headers: Mapping[str, str], env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Expand every header value; header names are taken literally."""
    return {name: expand(value, env) for name, value in headers.items()}


def expanded_secrets(headers: Mapping[str, str], env: Mapping[str, str] | None = None) -> list[str]:
    """The values the ``${NAME}`` references in ``headers`` expand to, longest first.

    These are what must never show up in output that is stored or shown (a
    service that echoes a token back in its body must not leak it); literal
    configured text is not secret, since the definition carrying it is not.
    """
    source = os.environ if env is None else env
    names = {name for value in headers.values() for name in _VAR.findall(value)}
    values = {source.get(name, "") for name in names}
    return sorted((v for v in values if len(v) >= _MIN_SECRET_CHARS), key=len, reverse=True)


def mask(text: str, secrets: list[str]) -> str:
    """``text`` with every secret replaced by ``***``."""
    for secret in secrets:
        text = text.replace(secret, "***")
    return text
