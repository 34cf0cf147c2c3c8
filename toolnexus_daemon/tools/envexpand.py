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


def expand(value: str, env: Mapping[str, str] | None = None) -> str:
    """Replace each ``${NAME}`` with ``env[NAME]``, or '' when it is not set."""
    source = os.environ if env is None else env
    return _VAR.sub(lambda m: source.get(m.group(1), ""), value)


def expand_headers(headers: Mapping[str, str], env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Expand every header value; header names are taken literally."""
    return {name: expand(value, env) for name, value in headers.items()}
