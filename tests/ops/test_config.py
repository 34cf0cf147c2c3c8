"""Every serve flag has a TOOLNEXUS_* twin named in --help; Info shows the effective configuration."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.e2e.test_crash_reattach import mock_transport
from tests.e2e.test_definition_drift import AGENT, cashier
from tests.ops.certs import Certs
from tests.support.daemon import DaemonProcess
from tests.support.grpc_client import open_stub
from toolnexus_client import Runtime
from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_daemon.config import DEFAULT_HELD_MEMORY, Settings, load, parse_size, serve_parser
from toolnexus_daemon.engine.state.held import DEFAULT_HELD_BYTES


def _env_table(tmp_path: Path, certs: Certs) -> dict[str, tuple[str, object]]:
    """env var -> (value, what Settings must then hold) for every documented variable."""
    token = tmp_path / "token"
    token.write_text("t")
    password = tmp_path / "pg-password"
    password.write_text("pw\n")
    mcp_config = tmp_path / "mcp.json"
    mcp_config.write_text('{"mcpServers": {}}')
    return {
        "TOOLNEXUS_LISTEN": ("127.0.0.1:7,unix:/tmp/x.sock", ("127.0.0.1:7", "unix:/tmp/x.sock")),
        "TOOLNEXUS_METRICS_LISTEN": ("127.0.0.1:9464", "127.0.0.1:9464"),
        "TOOLNEXUS_GRACE": ("2.5", 2.5),
        "TOOLNEXUS_LOG_LEVEL": ("DEBUG", "debug"),
        "TOOLNEXUS_EVENT_LOOP": ("UVLOOP", "uvloop"),
        "TOOLNEXUS_DATA_DIR": ("/srv/tn", Path("/srv/tn")),
        "TOOLNEXUS_NO_SYNC": ("1", False),
        "TOOLNEXUS_MAP_SIZE": ("2MiB", 2 << 20),
        "TOOLNEXUS_HELD_MEMORY": ("0", 0),
        "TOOLNEXUS_TOKEN_FILE": (str(token), "t"),
        "TOOLNEXUS_AUTH_TOKEN_ENV": ("TND_SOME_TOKEN", "from-env"),
        "TOOLNEXUS_REFLECTION_OPEN": ("true", True),
        "TOOLNEXUS_TLS_CERT": (str(certs.server.cert), certs.server.cert),
        "TOOLNEXUS_TLS_KEY": (str(certs.server.key), certs.server.key),
        "TOOLNEXUS_TLS_CLIENT_CA": (str(certs.ca), certs.ca),
        "TOOLNEXUS_INSECURE": ("yes", True),
        "TOOLNEXUS_MAX_MESSAGE_BYTES": ("1MiB", 1 << 20),
        "TOOLNEXUS_MAX_PROMPT_BYTES": ("2KiB", 2 << 10),
        "TOOLNEXUS_MAX_TOOLS_PER_AGENT": ("5", 5),
        "TOOLNEXUS_MAX_AGENTS": ("6", 6),
        "TOOLNEXUS_MAX_STRUCT_DEPTH": ("7", 7),
        "TOOLNEXUS_EVENT_RETENTION": ("8", 8),
        "TOOLNEXUS_MAX_MODEL_REPLY_BYTES": ("2MiB", 2 << 20),
        "TOOLNEXUS_MAX_TOOL_OUTPUT_BYTES": ("9000", 9000),
        "TOOLNEXUS_MAX_PENDING_TEXT_BYTES": ("1KiB", 1024),
        "TOOLNEXUS_MAX_PENDING_DATA_BYTES": ("3KiB", 3072),
        "TOOLNEXUS_ALLOW_ENV": ("MYAPP_*, OTHER_KEY", ("MYAPP_*", "OTHER_KEY")),
        "TOOLNEXUS_ALLOW_REMOTE_SHUTDOWN": ("1", True),
        "TOOLNEXUS_TOOL_DEADLINE_MS": ("1234", 1234),
        "TOOLNEXUS_MAX_WATCH_STREAMS_PER_CALLER": ("12", 12),
        "TOOLNEXUS_STORE": ("postgresql://tn@127.0.0.1:5432/tn", "postgresql://tn@127.0.0.1:5432/tn"),
        "TOOLNEXUS_STORE_PASSWORD_FILE": (str(password), "pw"),
        "TOOLNEXUS_ADVERTISE": ("10.0.0.7:50051", "10.0.0.7:50051"),
        "TOOLNEXUS_NODE_ID": ("node-7", "node-7"),
        "TOOLNEXUS_LEASE_MS": ("4000", 4000),
        "TOOLNEXUS_ANSWERS_LISTEN": ("8443", "127.0.0.1:8443"),
        "TOOLNEXUS_ANSWERS_BASE_URL": ("https://approve.example/", "https://approve.example"),
        "TOOLNEXUS_MCP_LISTEN": ("8765", "127.0.0.1:8765"),
        "TOOLNEXUS_MCP_EXPOSE": ("a, b", ("a", "b")),
        "TOOLNEXUS_OTLP_ENDPOINT": ("http://127.0.0.1:4318", "http://127.0.0.1:4318"),
        "TOOLNEXUS_OTEL_CAPTURE_CONTENT": ("on", True),
        "TOOLNEXUS_UI_LISTEN": ("8077", "127.0.0.1:8077"),
        "TOOLNEXUS_MCP_CONFIG": (str(mcp_config), str(mcp_config)),
    }


def _held(s: Settings, name: str) -> object:
    tls = s.tls
    return {
        "TOOLNEXUS_LISTEN": s.listen, "TOOLNEXUS_METRICS_LISTEN": s.metrics_listen,
        "TOOLNEXUS_GRACE": s.grace, "TOOLNEXUS_LOG_LEVEL": s.log_level, "TOOLNEXUS_EVENT_LOOP": s.event_loop,
        "TOOLNEXUS_DATA_DIR": s.data_dir,
        "TOOLNEXUS_NO_SYNC": s.sync, "TOOLNEXUS_MAP_SIZE": s.map_size, "TOOLNEXUS_TOKEN_FILE": s.auth_token,
        "TOOLNEXUS_HELD_MEMORY": s.held_memory,
        "TOOLNEXUS_AUTH_TOKEN_ENV": s.auth_token, "TOOLNEXUS_REFLECTION_OPEN": s.reflection_open,
        "TOOLNEXUS_TLS_CERT": tls and tls.cert, "TOOLNEXUS_TLS_KEY": tls and tls.key,
        "TOOLNEXUS_TLS_CLIENT_CA": tls and tls.client_ca, "TOOLNEXUS_INSECURE": s.insecure,
        "TOOLNEXUS_MAX_MESSAGE_BYTES": s.limits.max_message_bytes,
        "TOOLNEXUS_MAX_PROMPT_BYTES": s.limits.max_prompt_bytes,
        "TOOLNEXUS_MAX_TOOLS_PER_AGENT": s.limits.max_tools_per_agent,
        "TOOLNEXUS_MAX_AGENTS": s.limits.max_agents, "TOOLNEXUS_MAX_STRUCT_DEPTH": s.limits.max_struct_depth,
        "TOOLNEXUS_EVENT_RETENTION": s.limits.event_retention,
        "TOOLNEXUS_MAX_MODEL_REPLY_BYTES": s.limits.max_model_reply_bytes,
        "TOOLNEXUS_MAX_TOOL_OUTPUT_BYTES": s.limits.max_tool_output_bytes,
        "TOOLNEXUS_MAX_PENDING_TEXT_BYTES": s.limits.max_pending_text_bytes,
        "TOOLNEXUS_MAX_PENDING_DATA_BYTES": s.limits.max_pending_data_bytes,
        "TOOLNEXUS_ALLOW_ENV": s.allow_env,
        "TOOLNEXUS_ALLOW_REMOTE_SHUTDOWN": s.allow_remote_shutdown,
        "TOOLNEXUS_TOOL_DEADLINE_MS": s.limits.tool_deadline_ms,
        "TOOLNEXUS_MAX_WATCH_STREAMS_PER_CALLER": s.limits.max_watch_streams_per_caller,
        "TOOLNEXUS_STORE": s.store, "TOOLNEXUS_STORE_PASSWORD_FILE": s.store_password,
        "TOOLNEXUS_ADVERTISE": s.advertise, "TOOLNEXUS_NODE_ID": s.node_id, "TOOLNEXUS_LEASE_MS": s.lease_ms,
        "TOOLNEXUS_ANSWERS_LISTEN": s.answers and s.answers.listen,
        "TOOLNEXUS_ANSWERS_BASE_URL": s.answers and s.answers.base_url,
        "TOOLNEXUS_MCP_LISTEN": s.mcp and s.mcp.listen, "TOOLNEXUS_MCP_EXPOSE": s.mcp and s.mcp.expose,
        "TOOLNEXUS_OTLP_ENDPOINT": s.tracing.endpoint,
        "TOOLNEXUS_OTEL_CAPTURE_CONTENT": s.tracing.capture_content,
        "TOOLNEXUS_UI_LISTEN": s.ui_listen,
        "TOOLNEXUS_MCP_CONFIG": s.mcp_config and s.mcp_config.path,
    }[name]


def test_every_flag_names_its_environment_variable_in_help() -> None:
    for action in serve_parser({})._actions:
        if action.option_strings and action.dest not in ("help", "version"):
            assert "env TOOLNEXUS_" in (action.help or ""), action.option_strings
    done = subprocess.run([sys.executable, "-m", "toolnexus_daemon", "serve", "--help"], capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 0
    for flag in ("--tls-client-ca", "--metrics-listen", "--max-struct-depth", "--event-retention",
                 "--insecure", "--reflection-open", "--token-file", "TOOLNEXUS_TOKEN"):
        assert flag in done.stdout


def test_every_environment_variable_sets_its_flag(tmp_path: Path, certs: Certs) -> None:
    table = _env_table(tmp_path, certs)
    helps = " ".join(a.help or "" for a in serve_parser({})._actions)
    documented = set(re.findall(r"env (TOOLNEXUS_[A-Z_]+)", helps))
    assert documented - {"TOOLNEXUS_TOKEN"} == set(table)
    for name, (raw, expected) in table.items():
        env = {"TND_SOME_TOKEN": "from-env"}
        if name.startswith("TOOLNEXUS_TLS_"):  # TLS takes a certificate and its key together
            env.update(TOOLNEXUS_TLS_CERT=str(certs.server.cert), TOOLNEXUS_TLS_KEY=str(certs.server.key))
        if name in ("TOOLNEXUS_STORE_PASSWORD_FILE", "TOOLNEXUS_ADVERTISE", "TOOLNEXUS_NODE_ID",
                    "TOOLNEXUS_LEASE_MS"):  # these belong to a PostgreSQL store (and a cluster)
            env["TOOLNEXUS_STORE"] = "postgresql://tn@127.0.0.1:5432/tn"
        if name in ("TOOLNEXUS_NODE_ID", "TOOLNEXUS_LEASE_MS"):
            env["TOOLNEXUS_ADVERTISE"] = "10.0.0.7:50051"
        if name == "TOOLNEXUS_ANSWERS_BASE_URL":  # a base for links needs their listener
            env["TOOLNEXUS_ANSWERS_LISTEN"] = "127.0.0.1:0"
        if name.startswith("TOOLNEXUS_MCP_"):  # a listener offers runtimes; runtimes need a listener
            env.update(TOOLNEXUS_MCP_LISTEN="127.0.0.1:0", TOOLNEXUS_MCP_EXPOSE="a,b")
        env[name] = raw
        assert _held(load([], env), name) == expected, name
    assert load([], {"TOOLNEXUS_TOKEN": " tok "}).auth_token == "tok"
    assert load(["--max-agents", "3"], {"TOOLNEXUS_MAX_AGENTS": "9"}).limits.max_agents == 3  # the flag wins


def test_info_shows_listeners_and_the_configuration_without_secrets(tmp_path: Path) -> None:
    sock = Path("/tmp") / f"tnd-info-{tmp_path.name[-12:]}.sock"
    proc = DaemonProcess(tmp_path / "data", "--grace", "1.5", "--no-sync",
                         listen=("127.0.0.1:0", f"unix:{sock}"), env={"TOOLNEXUS_TOKEN": "hush-hush"})
    with proc:
        channel, stub = open_stub(f"unix:{sock}")
        with channel:
            info = stub.Info(pb.InfoRequest(), metadata=(("authorization", "Bearer hush-hush"),), timeout=5)
    assert list(info.listen) == proc.addresses
    shown = (info.config["grace"], info.config["sync"], info.config["auth-token"])
    assert shown == ("1.5", "false", "<redacted>")
    assert Path(info.config["data-dir"]) == proc.data_dir and info.store_size_bytes > 0
    assert "hush-hush" not in str(info)


def _maps_uvloop(pid: int) -> bool:
    """Whether uvloop's extension module is loaded in the process (Linux: its memory map)."""
    return "/uvloop/loop." in Path(f"/proc/{pid}/maps").read_text()


def test_the_daemon_runs_and_serves_on_the_event_loop_it_is_given(tmp_path: Path) -> None:
    """The standard library's loop by default (uvloop never loaded); --event-loop uvloop runs on uvloop."""
    for args, uses_uvloop in (((), False), (("--event-loop", "uvloop"), True)):
        proc = DaemonProcess(tmp_path / f"data-{uses_uvloop}", "--no-sync", *args)
        with proc:
            assert proc.proc is not None
            channel, stub = open_stub(proc.target)
            with channel:
                info = stub.Info(pb.InfoRequest(), timeout=5)
            assert info.config["event-loop"] == ("uvloop" if uses_uvloop else "asyncio")
            assert _maps_uvloop(proc.proc.pid) is uses_uvloop


def test_an_unknown_event_loop_is_refused() -> None:
    done = subprocess.run([sys.executable, "-m", "toolnexus_daemon", "serve", "--event-loop", "trio"],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 2 and "--event-loop" in done.stderr and "uvloop" in done.stderr


def test_held_memory_defaults_to_the_engines_bound_and_refuses_a_bad_size() -> None:
    assert load([], {}).held_memory == DEFAULT_HELD_MEMORY == DEFAULT_HELD_BYTES
    done = subprocess.run([sys.executable, "-m", "toolnexus_daemon", "serve", "--held-memory", "lots"],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 2 and "--held-memory" in done.stderr


def test_a_daemon_that_holds_nothing_suspends_and_resumes_as_one_that_holds(tmp_path: Path) -> None:
    """``--held-memory 0``: every transcript and request entry is read from the store, and the cycle
    ends the same as on a daemon that holds them (Info reports the setting)."""
    for held in ("0", "16MiB"):
        with DaemonProcess(tmp_path / f"data-{held}", "--no-sync", "--held-memory", held) as proc:
            with Runtime.new(target=proc.target, registry=cashier(), transport=mock_transport) as rt:
                handle = rt.spawn(rt.root, AGENT)
                rt.wake(handle, "charge 10 EUR")
                pending = rt.wait(handle, timeout=30).pending
                assert pending is not None
                out = rt.resume({"id": pending.id, "ok": True})
                assert out.result is not None and (out.result.status, out.result.text) == ("done", "charged")
                assert rt.info().config["held-memory"] == str(parse_size(held))
