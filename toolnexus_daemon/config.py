"""The daemon's settings: the only module that reads command-line flags and the environment.

Every ``serve`` flag has a ``TOOLNEXUS_*`` environment equivalent; a flag
given on the command line wins over the environment, which wins over the
default. The result is a frozen ``Settings`` handed to constructors, so no
other module reads flags or ``os.environ`` at import time. Refusals that
protect the operator (a non-loopback address without TLS, half a TLS
configuration) happen here, before anything is opened, with exit code 2.
"""

from __future__ import annotations

import argparse
import re
import secrets
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import __version__, config_answers, config_mcp, config_mcp_edge, config_tracing, config_ui
from .bounds import PeerLimits
from .config_answers import Answers
from .config_listen import is_loopback as host_is_loopback
from .config_mcp import McpConfig
from .config_mcp_edge import McpServe
from .config_tracing import Tracing
from .errors import StoreError
from .store.dsn import is_pg_dsn, read_password_file
from .store.dsn import redact as redact_dsn

DEFAULT_LISTEN = "127.0.0.1:50051"
DEFAULT_DATA_DIR = "./var/toolnexus"
DEFAULT_MAP_SIZE = 1 << 30
DEFAULT_LEASE_MS = 10_000
# what the engine holds of its own committed records, all runtimes together (engine/state/held.py,
# whose own default is the same)
DEFAULT_HELD_MEMORY = 16 << 20
MIN_LEASE_MS, MAX_LEASE_MS = 300, 600_000
DEFAULT_GRACE_S = 5.0
DEFAULT_MAX_MESSAGE_BYTES = 16 << 20
DEFAULT_MAX_PROMPT_BYTES = 1 << 20
# OpenAI-style APIs refuse more than 128 tools in one request
DEFAULT_MAX_TOOLS_PER_AGENT = 128
DEFAULT_MAX_AGENTS = 256
# bounds on what peers send (docs/protocol.md §7): model replies, tool outputs, pending requests
DEFAULT_MAX_MODEL_REPLY_BYTES = 1 << 20
DEFAULT_MAX_TOOL_OUTPUT_BYTES = 1 << 20
DEFAULT_MAX_PENDING_TEXT_BYTES = 64 << 10
DEFAULT_MAX_PENDING_DATA_BYTES = 256 << 10
DEFAULT_TOOL_DEADLINE_MS = 600_000
# Watch and WatchPending streams one caller (peer host and bearer token) may hold open at once
DEFAULT_MAX_WATCH_STREAMS_PER_CALLER = 100
DEFAULT_MAX_STRUCT_DEPTH = 24
# protobuf's parser stops at 100 message levels, about 32 Struct levels: a higher limit could not be reached
MAX_STRUCT_DEPTH_CEILING = 32
DEFAULT_EVENT_RETENTION = 100_000
LOG_LEVELS = ("debug", "info", "warning", "error")
# the asyncio loop the daemon runs on: the standard library's by default; uvloop (libuv) measured
# less daemon CPU per cycle at 1 lane but mixed at 16 (docs/decisions.md), so it is opt-in
EVENT_LOOPS = ("asyncio", "uvloop")
REDACTED = "<redacted>"
_SIZE = re.compile(r"^\s*(\d+)\s*([KMGT]i?B?|B)?\s*$", re.I)
_UNITS = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}

ENV_ONLY_HELP = """environment only:
  TOOLNEXUS_TOKEN       the bearer token itself (kept out of argv, where `ps` would show it)
"""


@dataclass(frozen=True)
class Limits:
    """What one request may carry; each has a flag, a default and a line in ``Info``."""

    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    max_prompt_bytes: int = DEFAULT_MAX_PROMPT_BYTES
    max_tools_per_agent: int = DEFAULT_MAX_TOOLS_PER_AGENT
    max_agents: int = DEFAULT_MAX_AGENTS
    max_struct_depth: int = DEFAULT_MAX_STRUCT_DEPTH
    # events kept per runtime when New leaves options.event_retention at 0; 0 = unbounded
    event_retention: int = DEFAULT_EVENT_RETENTION
    max_model_reply_bytes: int = DEFAULT_MAX_MODEL_REPLY_BYTES
    max_tool_output_bytes: int = DEFAULT_MAX_TOOL_OUTPUT_BYTES
    max_pending_text_bytes: int = DEFAULT_MAX_PENDING_TEXT_BYTES
    max_pending_data_bytes: int = DEFAULT_MAX_PENDING_DATA_BYTES
    tool_deadline_ms: int = DEFAULT_TOOL_DEADLINE_MS
    max_watch_streams_per_caller: int = DEFAULT_MAX_WATCH_STREAMS_PER_CALLER

    def as_dict(self) -> dict[str, int]:
        return {name: int(getattr(self, name)) for name in self.__dataclass_fields__}


@dataclass(frozen=True)
class Tls:
    """PEM file paths; the key's content is read only when the server binds."""

    cert: Path
    key: Path
    # set = mTLS: every TCP client must present a certificate signed by this CA
    client_ca: Path | None = None


@dataclass(frozen=True)
class Settings:
    listen: tuple[str, ...] = (DEFAULT_LISTEN,)
    data_dir: Path = Path(DEFAULT_DATA_DIR)
    # fsync every commit (docs/protocol.md §5); --no-sync trades durability for speed
    sync: bool = True
    map_size: int = DEFAULT_MAP_SIZE
    # what the engine holds of its own committed records (engine.state.held), all runtimes together
    held_memory: int = DEFAULT_HELD_MEMORY
    # seconds in-flight RPCs get to finish on SIGTERM
    grace: float = DEFAULT_GRACE_S
    log_level: str = "info"
    event_loop: str = EVENT_LOOPS[0]
    limits: Limits = field(default_factory=Limits)
    # bearer token every non-health call must present; "" = no authentication
    auth_token: str = field(default="", repr=False)
    # serve reflection without the token (the schema is public; the data is not)
    reflection_open: bool = False
    tls: Tls | None = None
    # allow plaintext on a non-loopback TCP address
    insecure: bool = False
    # host:port of the Prometheus endpoint; "" = off
    metrics_listen: str = ""
    # environment variables outgoing headers and api_key_env may read: names, or PREFIX* patterns
    allow_env: tuple[str, ...] = ()
    # Shutdown{daemon: true} may stop the daemon (for every tenant); off by default
    allow_remote_shutdown: bool = False
    # a postgresql:// DSN: the store is that database (store.postgres.store); "" = LMDB in data_dir
    store: str = field(default="", repr=False)
    store_password: str | None = field(default=None, repr=False)
    # on PostgreSQL every daemon is a member of the database's cluster (docs/protocol.md §9):
    # what other daemons dial to reach this one; "" = its TCP listen address when not a wildcard
    advertise: str = ""
    node_id: str = ""
    lease_ms: int = DEFAULT_LEASE_MS
    # the answer-link listener (docs/protocol.md §10); None = off
    answers: Answers | None = None
    # the MCP server (--mcp-listen, --mcp-expose); None = off
    mcp: McpServe | None = None
    # OpenTelemetry traces (config_tracing); off unless an OTLP endpoint is configured
    tracing: Tracing = field(default_factory=Tracing)
    # the web inspector's listener (docs/inspector.md); "" = off
    ui_listen: str = ""
    # the operator's MCP servers (--mcp-config); None = none
    mcp_config: McpConfig | None = None

    @property
    def clustered(self) -> bool:
        """On PostgreSQL: runtimes are held by lease, whether or not other daemons share the database."""
        return bool(self.store)

    @property
    def max_message_bytes(self) -> int:
        return self.limits.max_message_bytes

    def peer_limits(self) -> PeerLimits:
        """The bounds the engine puts on model replies and tool results."""
        lim = self.limits
        return PeerLimits(model_reply_bytes=lim.max_model_reply_bytes,
                          tool_output_bytes=lim.max_tool_output_bytes,
                          request_prompt_bytes=lim.max_pending_text_bytes,
                          request_data_bytes=lim.max_pending_data_bytes, json_depth=lim.max_struct_depth,
                          tool_deadline_ms=lim.tool_deadline_ms)

    def redacted(self) -> dict[str, str]:
        """The effective configuration by flag name, secrets replaced (``Info`` and the start log)."""
        tls = self.tls
        out = {"listen": ",".join(self.listen), "data-dir": str(self.data_dir), "sync": _bool(self.sync),
               "map-size": str(self.map_size), "held-memory": str(self.held_memory),
               "grace": str(self.grace), "log-level": self.log_level,
               "event-loop": self.event_loop,
               "auth-token": REDACTED if self.auth_token else "",
               "reflection-open": _bool(self.reflection_open),
               "insecure": _bool(self.insecure), "metrics-listen": self.metrics_listen,
               "tls-cert": str(tls.cert) if tls else "", "tls-key": str(tls.key) if tls else "",
               "tls-client-ca": str(tls.client_ca) if tls and tls.client_ca else "",
               "allow-env": ",".join(self.allow_env),
               "allow-remote-shutdown": _bool(self.allow_remote_shutdown),
               "store": redact_dsn(self.store) if self.store else "",
               "store-password-file": REDACTED if self.store_password is not None else "",
               "advertise": self.advertise, "node-id": self.node_id, "lease-ms": str(self.lease_ms),
               "answers-listen": self.answers.listen if self.answers else "",
               "answers-base-url": self.answers.base_url if self.answers else "",
               "mcp-listen": self.mcp.listen if self.mcp else "",
               "mcp-expose": ",".join(self.mcp.expose) if self.mcp else "",
               "otlp-endpoint": redact_dsn(self.tracing.endpoint) if self.tracing.endpoint else "",
               "otel-capture-content": _bool(self.tracing.capture_content),
               "ui-listen": self.ui_listen,
               "mcp-config": self.mcp_config.path if self.mcp_config else ""}
        out.update({name.replace("_", "-"): str(value) for name, value in self.limits.as_dict().items()})
        return out


def _bool(value: bool) -> str:
    return "true" if value else "false"


def parse_size(text: str) -> int:
    """Bytes from ``1073741824``, ``512MiB``, ``1G`` or ``2GB`` (binary units)."""
    match = _SIZE.match(text)
    if not match:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 1GiB, 512MiB, 1073741824)")
    unit = (match.group(2) or "").upper()[:1]
    return int(match.group(1)) * _UNITS[unit if unit != "B" else ""]


def _truthy(text: str) -> bool:
    return text.strip().lower() in ("1", "true", "yes", "on")


def is_loopback(address: str) -> bool:
    """True for ``unix:`` sockets and TCP on 127.0.0.0/8, ::1 or localhost; False for anything else."""
    if address.startswith("unix:"):
        return True
    return host_is_loopback(address.rpartition(":")[0].strip("[]"))  # a host name could resolve anywhere


@dataclass(frozen=True)
class BadEnv:
    """An environment value that does not parse, kept as the flag's default so the error can name the
    variable the operator set (argparse would name the flag, which nobody passed)."""

    name: str
    raw: str
    why: str


def env_value(env: Mapping[str, str], name: str, kind: Callable[[str], Any], default: Any) -> Any:
    """``env[name]`` converted by ``kind``; ``default`` when unset; a ``BadEnv`` when it does not parse."""
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        return kind(raw)
    except (ValueError, argparse.ArgumentTypeError) as exc:
        return BadEnv(name, raw, str(exc))


def _check_env(parser: argparse.ArgumentParser, ns: argparse.Namespace) -> None:
    """Fail on a bad environment value the command line did not override."""
    for dest, value in vars(ns).items():
        if isinstance(value, BadEnv):
            flag = "--" + dest.replace("_", "-")
            parser.error(f"environment variable {value.name}={value.raw!r} is not a valid value for {flag}"
                         f" ({value.why}); fix or unset it, or pass {flag} on the command line")


def check_listen_form(address: str) -> str | None:
    """Why ``address`` is not ``HOST:PORT`` or ``unix:PATH``, or None when it is."""
    example = "e.g. 127.0.0.1:50051 (127.0.0.1:0 picks a free port) or unix:/run/toolnexus/daemon.sock"
    if address.startswith("unix:"):
        return None if address[5:].strip() else f"the unix socket path is missing; {example}"
    host, colon, port = address.rpartition(":")
    if not colon or address.endswith("]"):
        return f"the port is missing; want HOST:PORT, {example}"
    if not host.strip("[]"):
        return f"the host is missing; want HOST:PORT, e.g. 127.0.0.1:{port or 50051} for this machine only"
    if not port.isdigit() or int(port) > 65535:
        return f"the port {port!r} is not a number from 0 to 65535; {example}"
    return None


def serve_parser(env: Mapping[str, str]) -> argparse.ArgumentParser:
    """The ``serve`` argument parser, its defaults taken from ``env`` where set."""
    p = argparse.ArgumentParser(prog="toolnexus-daemon serve", epilog=ENV_ONLY_HELP,
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                description="Run the toolnexus agent-runtime gRPC sidecar.")
    p.add_argument("-V", "--version", action="version", version=f"toolnexus-daemon {__version__}")
    _listening_flags(p, env)
    _store_flags(p, env)
    _cluster_flags(p, env)
    _security_flags(p, env)
    _limit_flags(p, env)
    return p


def _listening_flags(p: argparse.ArgumentParser, env: Mapping[str, str]) -> None:
    g = p.add_argument_group("listening")
    listen_env = [a for a in env.get("TOOLNEXUS_LISTEN", "").split(",") if a.strip()]
    g.add_argument("--listen", action="append", default=None, metavar="ADDR",
                   help="host:port or unix:/path; repeatable (env TOOLNEXUS_LISTEN, comma-separated; "
                        f"default {DEFAULT_LISTEN})")
    p.set_defaults(listen_env=listen_env)
    g.add_argument("--metrics-listen", default=env.get("TOOLNEXUS_METRICS_LISTEN", ""), metavar="HOST:PORT",
                   help="serve Prometheus metrics over HTTP at /metrics (env TOOLNEXUS_METRICS_LISTEN; "
                        "default off)")
    config_answers.add_flags(g, env)
    config_mcp.add_flags(g, env)
    config_mcp_edge.add_flags(g, env)
    config_tracing.add_flags(g, env)
    config_ui.add_flags(g, env)
    g.add_argument("--grace", type=float, default=env_value(env, "TOOLNEXUS_GRACE", float, DEFAULT_GRACE_S),
                   help="seconds in-flight RPCs get on SIGTERM (env TOOLNEXUS_GRACE; default %(default)s)")
    g.add_argument("--log-level", choices=LOG_LEVELS, default=env.get("TOOLNEXUS_LOG_LEVEL", "info").lower(),
                   help="(env TOOLNEXUS_LOG_LEVEL; default %(default)s)")
    g.add_argument("--event-loop", choices=EVENT_LOOPS,
                   default=env.get("TOOLNEXUS_EVENT_LOOP", EVENT_LOOPS[0]).lower(),
                   help="the event loop: the standard library's asyncio or uvloop (libuv; measured in "
                        "docs/decisions.md) (env TOOLNEXUS_EVENT_LOOP; default %(default)s)")


def _store_flags(p: argparse.ArgumentParser, env: Mapping[str, str]) -> None:
    g = p.add_argument_group("store")
    g.add_argument("--data-dir", type=Path, default=Path(env.get("TOOLNEXUS_DATA_DIR", DEFAULT_DATA_DIR)),
                   help="the LMDB data directory (env TOOLNEXUS_DATA_DIR; default %(default)s)")
    g.add_argument("--no-sync", action="store_true", default=_truthy(env.get("TOOLNEXUS_NO_SYNC", "")),
                   help="do not fsync each commit: faster, loses recent commits on a crash "
                        "(env TOOLNEXUS_NO_SYNC=1)")
    g.add_argument("--map-size", type=parse_size,
                   default=env_value(env, "TOOLNEXUS_MAP_SIZE", parse_size, DEFAULT_MAP_SIZE),
                   help="LMDB map size, e.g. 1GiB (env TOOLNEXUS_MAP_SIZE; default 1GiB)")
    g.add_argument("--held-memory", type=parse_size, metavar="SIZE",
                   default=env_value(env, "TOOLNEXUS_HELD_MEMORY", parse_size, DEFAULT_HELD_MEMORY),
                   help="what the daemon holds of the transcripts and request entries it committed, so "
                        "a resume reads them without a store round trip, as encoded, for all runtimes "
                        "together; 0 = hold nothing (env TOOLNEXUS_HELD_MEMORY; default 16MiB)")
    g.add_argument("--store", default=env.get("TOOLNEXUS_STORE", ""), metavar="DSN",
                   help="keep the state in PostgreSQL instead of LMDB: postgresql://USER@HOST:PORT/DB "
                        "or postgresql://USER@/DB?host=/socketdir (env TOOLNEXUS_STORE)")
    g.add_argument("--store-password-file", type=Path, metavar="PATH",
                   default=env.get("TOOLNEXUS_STORE_PASSWORD_FILE") or None,
                   help="the database password, read from PATH (env TOOLNEXUS_STORE_PASSWORD_FILE; "
                        "else libpq's PGPASSWORD or ~/.pgpass)")


def _cluster_flags(p: argparse.ArgumentParser, env: Mapping[str, str]) -> None:
    g = p.add_argument_group("cluster (many daemons on one PostgreSQL store)")
    g.add_argument("--advertise", default=env.get("TOOLNEXUS_ADVERTISE", ""), metavar="HOST:PORT",
                   help="where the other daemons on the --store database reach this one's gRPC listener, "
                        "to forward calls for the runtimes it owns (env TOOLNEXUS_ADVERTISE; default: the "
                        "first TCP --listen address unless it is a wildcard such as 0.0.0.0)")
    g.add_argument("--node-id", default=env.get("TOOLNEXUS_NODE_ID", ""), metavar="ID",
                   help="this daemon's name in the cluster, unique among live daemons (env "
                        "TOOLNEXUS_NODE_ID; default HOST-RANDOM, new at every start)")
    g.add_argument("--lease-ms", type=int, metavar="MS",
                   default=env_value(env, "TOOLNEXUS_LEASE_MS", int, DEFAULT_LEASE_MS),
                   help="how long a runtime's owner may go silent before another daemon takes the runtime "
                        f"over; renewed every third (env TOOLNEXUS_LEASE_MS; default {DEFAULT_LEASE_MS})")


def _cluster(parser: argparse.ArgumentParser, ns: argparse.Namespace) -> dict[str, Any]:
    if not ns.store:
        for flag, value in (("--advertise", ns.advertise), ("--node-id", ns.node_id)):
            if value:
                parser.error(f"{flag} names a member of a cluster, whose daemons share one PostgreSQL "
                             "database: give --store postgresql://... too, or drop it")
        return {}
    if ns.advertise:
        host, _, port = ns.advertise.rpartition(":")
        if not host or not port.isdigit() or not 0 <= int(port) < 65536:
            parser.error(f"--advertise {ns.advertise!r}: want HOST:PORT, the address other daemons dial")
    if not MIN_LEASE_MS <= ns.lease_ms <= MAX_LEASE_MS:
        parser.error(f"--lease-ms {ns.lease_ms}: want {MIN_LEASE_MS} to {MAX_LEASE_MS}")
    node = ns.node_id or f"{socket.gethostname()}-{secrets.token_hex(4)}"
    if len(node) > 200 or not node.isprintable() or "/" in node:
        parser.error(f"--node-id {node[:40]!r}: at most 200 printable characters, no '/'")
    return {"advertise": ns.advertise, "node_id": node, "lease_ms": ns.lease_ms}


def _security_flags(p: argparse.ArgumentParser, env: Mapping[str, str]) -> None:
    g = p.add_argument_group("security")
    token_file = env.get("TOOLNEXUS_TOKEN_FILE") or env.get("TOOLNEXUS_AUTH_TOKEN_FILE") or None
    g.add_argument("--token-file", "--auth-token-file", dest="auth_token_file", type=Path, default=token_file,
                   metavar="PATH", help="require 'authorization: Bearer <token>' on every call but health, "
                                        "the token read from PATH (env TOOLNEXUS_TOKEN_FILE)")
    g.add_argument("--auth-token-env", default=env.get("TOOLNEXUS_AUTH_TOKEN_ENV", ""), metavar="NAME",
                   help="the same, the token read from environment variable NAME "
                        "(env TOOLNEXUS_AUTH_TOKEN_ENV; or put the token itself in TOOLNEXUS_TOKEN)")
    g.add_argument("--reflection-open", action="store_true",
                   default=_truthy(env.get("TOOLNEXUS_REFLECTION_OPEN", "")),
                   help="serve reflection without the token (env TOOLNEXUS_REFLECTION_OPEN=1)")
    g.add_argument("--tls-cert", type=Path, default=env.get("TOOLNEXUS_TLS_CERT") or None, metavar="PEM",
                   help="serve TCP listeners over TLS with this certificate chain (env TOOLNEXUS_TLS_CERT)")
    g.add_argument("--tls-key", type=Path, default=env.get("TOOLNEXUS_TLS_KEY") or None, metavar="PEM",
                   help="the certificate's private key (env TOOLNEXUS_TLS_KEY)")
    g.add_argument("--tls-client-ca", type=Path, default=env.get("TOOLNEXUS_TLS_CLIENT_CA") or None,
                   metavar="PEM", help="mTLS: require client certificates signed by this CA "
                                       "(env TOOLNEXUS_TLS_CLIENT_CA)")
    g.add_argument("--insecure", action="store_true", default=_truthy(env.get("TOOLNEXUS_INSECURE", "")),
                   help="allow plaintext on a non-loopback TCP address (env TOOLNEXUS_INSECURE=1)")
    allow_env = [a.strip() for a in env.get("TOOLNEXUS_ALLOW_ENV", "").split(",") if a.strip()]
    g.add_argument("--allow-env", action="append", default=None, metavar="NAME_OR_PREFIX*",
                   help="an environment variable that header ${NAME} and llm.api_key_env may read; a "
                        "trailing * allows a prefix; repeatable (env TOOLNEXUS_ALLOW_ENV, comma-separated; "
                        "default none)")
    p.set_defaults(allow_env_env=allow_env)
    g.add_argument("--allow-remote-shutdown", action="store_true",
                   default=_truthy(env.get("TOOLNEXUS_ALLOW_REMOTE_SHUTDOWN", "")),
                   help="let Shutdown{daemon: true} stop the daemon for every tenant; without it that "
                        "call is PERMISSION_DENIED and SIGTERM is the way "
                        "(env TOOLNEXUS_ALLOW_REMOTE_SHUTDOWN=1)")


def _limit_flags(p: argparse.ArgumentParser, env: Mapping[str, str]) -> None:
    g = p.add_argument_group("limits (each is reported by Info)")

    def limit(flag: str, default: int, what: str, kind: Callable[[str], int] = int) -> None:
        name = "TOOLNEXUS_" + flag.upper().replace("-", "_")
        g.add_argument(f"--{flag}", type=kind, default=env_value(env, name, kind, default), metavar="N",
                       help=f"{what} (env {name}; default {default})")

    limit("max-message-bytes", DEFAULT_MAX_MESSAGE_BYTES,
          "largest gRPC message sent or received; bigger ones are RESOURCE_EXHAUSTED", parse_size)
    limit("max-prompt-bytes", DEFAULT_MAX_PROMPT_BYTES, "largest Wake prompt or Post text, in UTF-8 bytes",
          parse_size)
    limit("max-tools-per-agent", DEFAULT_MAX_TOOLS_PER_AGENT, "tools one AgentDef may declare")
    limit("max-agents", DEFAULT_MAX_AGENTS, "agents one registry (New) may define")
    limit("max-struct-depth", DEFAULT_MAX_STRUCT_DEPTH,
          f"nesting of any Struct in a request (at most {MAX_STRUCT_DEPTH_CEILING})")
    limit("event-retention", DEFAULT_EVENT_RETENTION,
          "events kept per runtime when New sets no options.event_retention; 0 = unbounded")
    limit("max-model-reply-bytes", DEFAULT_MAX_MODEL_REPLY_BYTES,
          "largest model reply (the assistant message) a turn accepts; larger ends the turn error",
          parse_size)
    limit("max-tool-output-bytes", DEFAULT_MAX_TOOL_OUTPUT_BYTES,
          "largest tool output kept; longer is truncated with a marker the model reads", parse_size)
    limit("max-pending-text-bytes", DEFAULT_MAX_PENDING_TEXT_BYTES,
          "largest prompt, kind or url of a request a tool suspends on", parse_size)
    limit("max-pending-data-bytes", DEFAULT_MAX_PENDING_DATA_BYTES,
          "largest data (or metadata) a tool result carries, as JSON", parse_size)
    limit("tool-deadline-ms", DEFAULT_TOOL_DEADLINE_MS,
          "total time one tool call may take, dispatch to result, unless its ToolDef sets deadline_ms")
    limit("max-watch-streams-per-caller", DEFAULT_MAX_WATCH_STREAMS_PER_CALLER,
          "Watch and WatchPending streams one caller (peer host and bearer token) may hold open; "
          "more are RESOURCE_EXHAUSTED")


def _auth_token(parser: argparse.ArgumentParser, ns: argparse.Namespace, env: Mapping[str, str]) -> str:
    """The bearer token: --token-file, else --auth-token-env, else TOOLNEXUS_TOKEN, else none."""
    if ns.auth_token_env and ns.auth_token_file:
        parser.error("give --token-file or --auth-token-env, not both")
    if ns.auth_token_file:
        try:
            token = Path(ns.auth_token_file).read_text().strip()
        except OSError as exc:
            parser.error(f"--token-file: cannot read {ns.auth_token_file}: {exc.strerror}")
        if not token:
            parser.error(f"--token-file: {ns.auth_token_file} is empty")
        return token
    if ns.auth_token_env:
        token = env.get(ns.auth_token_env, "").strip()
        if not token:
            parser.error(f"--auth-token-env: environment variable {ns.auth_token_env} is empty or not set")
        return token
    return env.get("TOOLNEXUS_TOKEN", "").strip()


def _tls(parser: argparse.ArgumentParser, ns: argparse.Namespace) -> Tls | None:
    if not (ns.tls_cert or ns.tls_key or ns.tls_client_ca):
        return None
    if not (ns.tls_cert and ns.tls_key):
        parser.error("TLS needs both --tls-cert and --tls-key (--tls-client-ca adds mTLS on top)")
    files = {"--tls-cert": ns.tls_cert, "--tls-key": ns.tls_key, "--tls-client-ca": ns.tls_client_ca}
    for flag, path in files.items():
        if path is not None and not Path(path).is_file():
            parser.error(f"{flag}: {path} is not a readable file")
    return Tls(cert=Path(ns.tls_cert), key=Path(ns.tls_key),
               client_ca=Path(ns.tls_client_ca) if ns.tls_client_ca else None)


def _limits(parser: argparse.ArgumentParser, ns: argparse.Namespace) -> Limits:
    limits = Limits(max_message_bytes=ns.max_message_bytes, max_prompt_bytes=ns.max_prompt_bytes,
                    max_tools_per_agent=ns.max_tools_per_agent, max_agents=ns.max_agents,
                    max_struct_depth=ns.max_struct_depth, event_retention=ns.event_retention,
                    max_model_reply_bytes=ns.max_model_reply_bytes,
                    max_tool_output_bytes=ns.max_tool_output_bytes,
                    max_pending_text_bytes=ns.max_pending_text_bytes,
                    max_pending_data_bytes=ns.max_pending_data_bytes, tool_deadline_ms=ns.tool_deadline_ms,
                    max_watch_streams_per_caller=ns.max_watch_streams_per_caller)
    for name, value in limits.as_dict().items():
        if value < 0 or (value == 0 and name != "event_retention"):
            parser.error(f"--{name.replace('_', '-')} must be positive")
    if limits.max_struct_depth > MAX_STRUCT_DEPTH_CEILING:
        parser.error(f"--max-struct-depth {limits.max_struct_depth}: protobuf cannot parse Structs nested "
                     f"deeper than about {MAX_STRUCT_DEPTH_CEILING}; use at most that")
    return limits


def _allow_env(parser: argparse.ArgumentParser, patterns: Sequence[str]) -> tuple[str, ...]:
    for pattern in patterns:
        if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*\*?$|^\*$", pattern):
            parser.error(f"--allow-env {pattern!r}: want a variable name, or a prefix ending in * "
                         "(e.g. MYAPP_KEY or MYAPP_*)")
    return tuple(patterns)


def _check_listen(parser: argparse.ArgumentParser, listen: Sequence[str], tls: Tls | None,
                  insecure: bool, metrics: str, source: str = "--listen") -> None:
    for address in listen:
        wrong = check_listen_form(address)
        if wrong:
            parser.error(f"{source} {address!r}: {wrong}")
        if not is_loopback(address) and tls is None and not insecure:
            parser.error(f"--listen {address}: a non-loopback address needs TLS (--tls-cert/--tls-key); "
                         "pass --insecure to serve plaintext there anyway")
    if metrics and not re.match(r"^\S+:\d+$", metrics):
        parser.error(f"--metrics-listen {metrics!r}: want host:port (e.g. 127.0.0.1:9464)")


def _check_data_dir(parser: argparse.ArgumentParser, ns: argparse.Namespace) -> None:
    """An LMDB directory that is a file (or sits under one) is named as such, not as ``File exists``."""
    if ns.store:
        return
    path = Path(ns.data_dir)
    for part in (path, *path.parents):
        if part.exists() and not part.is_dir():
            where = "is" if part == path else f"is under {part}, which is"
            parser.error(f"--data-dir {path} {where} a file, not a directory; point --data-dir at a "
                         "directory (it is created when missing)")
        if part.exists():
            return


def _store(parser: argparse.ArgumentParser, ns: argparse.Namespace) -> dict[str, Any]:
    if not ns.store:
        if ns.store_password_file is not None:
            parser.error("--store-password-file (env TOOLNEXUS_STORE_PASSWORD_FILE) is for a PostgreSQL "
                         "store: give --store postgresql://... too, or drop it")
        return {}
    if not is_pg_dsn(ns.store):
        parser.error(f"--store {redact_dsn(ns.store)!r}: want a postgresql://USER@HOST:PORT/DB address")
    try:
        return {"store": ns.store, "store_password": read_password_file(ns.store_password_file)}
    except StoreError as exc:
        parser.error(str(exc))


def load(argv: Sequence[str], env: Mapping[str, str]) -> Settings:
    """Settings from the ``serve`` arguments and the environment; exits 2 on a bad value."""
    parser = serve_parser(env)
    ns = parser.parse_args(list(argv))
    _check_env(parser, ns)
    listen = tuple(ns.listen or ns.listen_env or [DEFAULT_LISTEN])
    if ns.log_level not in LOG_LEVELS:
        parser.error(f"--log-level must be one of {', '.join(LOG_LEVELS)}")
    if ns.event_loop not in EVENT_LOOPS:
        parser.error(f"--event-loop must be one of {', '.join(EVENT_LOOPS)}")
    if ns.grace < 0:
        parser.error("--grace must not be negative")
    if ns.map_size <= 0:
        parser.error("--map-size must be positive")
    tls = _tls(parser, ns)
    _check_listen(parser, listen, tls, ns.insecure, ns.metrics_listen,
                  "--listen" if ns.listen else "TOOLNEXUS_LISTEN" if ns.listen_env else "--listen")
    _check_data_dir(parser, ns)
    token = _auth_token(parser, ns, env)
    return Settings(listen=listen, data_dir=ns.data_dir, sync=not ns.no_sync, map_size=ns.map_size,
                    held_memory=ns.held_memory,
                    grace=ns.grace, log_level=ns.log_level, event_loop=ns.event_loop,
                    limits=_limits(parser, ns),
                    auth_token=token, reflection_open=ns.reflection_open, tls=tls,
                    insecure=ns.insecure, metrics_listen=ns.metrics_listen,
                    allow_env=_allow_env(parser, ns.allow_env or ns.allow_env_env),
                    allow_remote_shutdown=ns.allow_remote_shutdown, **_store(parser, ns),
                    answers=config_answers.answers(parser, ns, tls is not None, ns.insecure),
                    mcp=config_mcp_edge.mcp(parser, ns, tls is not None, ns.insecure),
                    tracing=config_tracing.tracing(parser, ns),
                    ui_listen=config_ui.ui_listen(parser, ns, token=bool(token), tls=tls is not None,
                                                  insecure=ns.insecure),
                    mcp_config=config_mcp.load_flag(parser, ns.mcp_config),
                    **_cluster(parser, ns))
