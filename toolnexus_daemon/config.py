"""The daemon's settings: the only module that reads command-line flags and the environment.

Every ``serve`` flag has a ``TOOLNEXUS_*`` environment equivalent; a flag
given on the command line wins over the environment, which wins over the
default. The result is a frozen ``Settings`` handed to constructors, so no
other module reads flags or ``os.environ`` at import time.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_LISTEN = "127.0.0.1:50051"
DEFAULT_DATA_DIR = "./var/toolnexus"
DEFAULT_MAP_SIZE = 1 << 30
DEFAULT_GRACE_S = 5.0
DEFAULT_MAX_MESSAGE_BYTES = 16 << 20
LOG_LEVELS = ("debug", "info", "warning", "error")
_SIZE = re.compile(r"^\s*(\d+)\s*([KMGT]i?B?|B)?\s*$", re.I)
_UNITS = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


@dataclass(frozen=True)
class Settings:
    listen: tuple[str, ...] = (DEFAULT_LISTEN,)
    data_dir: Path = Path(DEFAULT_DATA_DIR)
    # fsync every commit (DESIGN §5); --no-sync trades durability for speed
    sync: bool = True
    map_size: int = DEFAULT_MAP_SIZE
    # seconds in-flight RPCs get to finish on SIGTERM
    grace: float = DEFAULT_GRACE_S
    log_level: str = "info"
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    # bearer token every non-health call must present; "" = no authentication
    auth_token: str = field(default="", repr=False)


def parse_size(text: str) -> int:
    """Bytes from ``1073741824``, ``512MiB``, ``1G`` or ``2GB`` (binary units)."""
    match = _SIZE.match(text)
    if not match:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 1GiB, 512MiB, 1073741824)")
    unit = (match.group(2) or "").upper()[:1]
    return int(match.group(1)) * _UNITS[unit if unit != "B" else ""]


def _truthy(text: str) -> bool:
    return text.strip().lower() in ("1", "true", "yes", "on")


def serve_parser(env: Mapping[str, str]) -> argparse.ArgumentParser:
    """The ``serve`` argument parser, its defaults taken from ``env`` where set."""
    p = argparse.ArgumentParser(prog="toolnexus-daemon serve",
                                description="Run the toolnexus agent-runtime gRPC sidecar.")
    listen_env = [a for a in env.get("TOOLNEXUS_LISTEN", "").split(",") if a.strip()]
    p.add_argument("--listen", action="append", default=None, metavar="ADDR",
                   help="host:port or unix:/path; repeatable (env TOOLNEXUS_LISTEN, comma-separated; "
                        f"default {DEFAULT_LISTEN})")
    p.set_defaults(listen_env=listen_env)
    p.add_argument("--data-dir", type=Path, default=Path(env.get("TOOLNEXUS_DATA_DIR", DEFAULT_DATA_DIR)),
                   help="the LMDB data directory (env TOOLNEXUS_DATA_DIR; default %(default)s)")
    p.add_argument("--no-sync", action="store_true", default=_truthy(env.get("TOOLNEXUS_NO_SYNC", "")),
                   help="do not fsync each commit: faster, loses recent commits on a crash "
                        "(env TOOLNEXUS_NO_SYNC=1)")
    p.add_argument("--map-size", type=parse_size,
                   default=env.get("TOOLNEXUS_MAP_SIZE", str(DEFAULT_MAP_SIZE)),
                   help="LMDB map size, e.g. 1GiB (env TOOLNEXUS_MAP_SIZE; default 1GiB)")
    p.add_argument("--grace", type=float, default=env.get("TOOLNEXUS_GRACE", str(DEFAULT_GRACE_S)),
                   help="seconds in-flight RPCs get on SIGTERM (env TOOLNEXUS_GRACE; default %(default)s)")
    p.add_argument("--log-level", choices=LOG_LEVELS, default=env.get("TOOLNEXUS_LOG_LEVEL", "info").lower(),
                   help="(env TOOLNEXUS_LOG_LEVEL; default %(default)s)")
    p.add_argument("--max-message-bytes", type=parse_size,
                   default=env.get("TOOLNEXUS_MAX_MESSAGE_BYTES", str(DEFAULT_MAX_MESSAGE_BYTES)),
                   help="largest gRPC message sent or received "
                        "(env TOOLNEXUS_MAX_MESSAGE_BYTES; default 16MiB)")
    p.add_argument("--auth-token-env", default=env.get("TOOLNEXUS_AUTH_TOKEN_ENV", ""), metavar="NAME",
                   help="require 'authorization: Bearer <token>', the token read from "
                        "environment variable NAME (env TOOLNEXUS_AUTH_TOKEN_ENV)")
    p.add_argument("--auth-token-file", type=Path, default=env.get("TOOLNEXUS_AUTH_TOKEN_FILE") or None,
                   metavar="PATH",
                   help="the same, the token read from a file (env TOOLNEXUS_AUTH_TOKEN_FILE)")
    return p


def _auth_token(parser: argparse.ArgumentParser, ns: argparse.Namespace, env: Mapping[str, str]) -> str:
    if ns.auth_token_env and ns.auth_token_file:
        parser.error("give --auth-token-env or --auth-token-file, not both")
    if ns.auth_token_env:
        token = env.get(ns.auth_token_env, "").strip()
        if not token:
            parser.error(f"--auth-token-env: environment variable {ns.auth_token_env} is empty or not set")
        return token
    if ns.auth_token_file:
        try:
            token = Path(ns.auth_token_file).read_text().strip()
        except OSError as exc:
            parser.error(f"--auth-token-file: cannot read {ns.auth_token_file}: {exc.strerror}")
        if not token:
            parser.error(f"--auth-token-file: {ns.auth_token_file} is empty")
        return token
    return ""


def load(argv: Sequence[str], env: Mapping[str, str]) -> Settings:
    """Settings from the ``serve`` arguments and the environment; exits 2 on a bad value."""
    parser = serve_parser(env)
    ns = parser.parse_args(list(argv))
    listen = tuple(ns.listen or ns.listen_env or [DEFAULT_LISTEN])
    if ns.log_level not in LOG_LEVELS:
        parser.error(f"--log-level must be one of {', '.join(LOG_LEVELS)}")
    if ns.grace < 0:
        parser.error("--grace must not be negative")
    if ns.map_size <= 0 or ns.max_message_bytes <= 0:
        parser.error("--map-size and --max-message-bytes must be positive")
    return Settings(listen=listen, data_dir=ns.data_dir, sync=not ns.no_sync, map_size=ns.map_size,
                    grace=ns.grace, log_level=ns.log_level, max_message_bytes=ns.max_message_bytes,
                    auth_token=_auth_token(parser, ns, env))
