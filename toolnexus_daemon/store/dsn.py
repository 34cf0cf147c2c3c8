"""Store addresses as the operator writes them: which are PostgreSQL DSNs, how they show redacted,
and the password file. No driver import here, so configuration stays cheap to load."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from ..errors import StoreError


def is_pg_dsn(value: str) -> bool:
    return value.startswith(("postgresql://", "postgres://"))


def redact(dsn: str) -> str:
    """The DSN with any password replaced by ``***`` (query parameters ``password=`` too)."""
    parts = urlsplit(dsn)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, hostport = netloc.rpartition("@")
        user, sep, _pw = userinfo.partition(":")
        netloc = f"{user}{':***' if sep and _pw else ''}@{hostport}"
    query = "&".join("password=***" if q.lower().startswith("password=") else q
                     for q in parts.query.split("&")) if parts.query else ""
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def read_password_file(path: Path | None) -> str | None:
    if path is None:
        return None
    try:
        return path.read_text(encoding="utf-8").strip("\r\n")
    except OSError as exc:
        raise StoreError(f"cannot read the store password file {path}: {exc}") from exc
