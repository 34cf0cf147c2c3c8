"""``${NAME}`` expansion of configured header values (DESIGN §3).

Secrets such as API tokens reach outgoing headers only through the
environment of the daemon, so an agent definition (which travels over gRPC
and is stored in LMDB) never holds them. Expanded values are secrets: callers
must never log them or put them into error messages.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
# shorter values (e.g. "1", "json") are too common to mask without mangling text
_MIN_SECRET_CHARS = 6


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
