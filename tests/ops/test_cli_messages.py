"""The command line says what is wrong: each refusal names the real problem and its fix (the real
``toolnexus-daemon serve`` subprocess, exit status 2, one line on stderr)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from toolnexus_daemon import __version__


def serve(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("TOOLNEXUS_")}
    return subprocess.run([sys.executable, "-m", "toolnexus_daemon", "serve", *args], capture_output=True,
                          text=True, timeout=30, env={**clean, **(env or {})})


@pytest.mark.parametrize(("address", "message"), [
    ("localhost", "--listen 'localhost': the port is missing; want HOST:PORT"),
    (":50063", "--listen ':50063': the host is missing; want HOST:PORT, e.g. 127.0.0.1:50063"),
    ("[::1]", "--listen '[::1]': the port is missing"),
    ("127.0.0.1:99999", "the port '99999' is not a number from 0 to 65535"),
    ("127.0.0.1:http", "the port 'http' is not a number"),
    ("unix:", "the unix socket path is missing"),
])
def test_a_listen_address_without_host_or_port_says_which(address: str, message: str, tmp_path: Path) -> None:
    """Before: 'a non-loopback address needs TLS', which sent people to make certificates."""
    done = serve("--listen", address, "--data-dir", str(tmp_path / "d"))
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert "needs TLS" not in done.stderr


def test_a_listen_address_from_the_environment_names_the_variable(tmp_path: Path) -> None:
    done = serve("--data-dir", str(tmp_path / "d"), env={"TOOLNEXUS_LISTEN": "localhost"})
    assert done.returncode == 2 and "TOOLNEXUS_LISTEN 'localhost': the port is missing" in done.stderr


def test_a_public_address_still_needs_tls(tmp_path: Path) -> None:
    done = serve("--listen", "0.0.0.0:50063", "--data-dir", str(tmp_path / "d"))
    assert done.returncode == 2 and "a non-loopback address needs TLS" in done.stderr


@pytest.mark.parametrize(("name", "value", "flag"), [
    ("TOOLNEXUS_MAX_AGENTS", "abc", "--max-agents"),
    ("TOOLNEXUS_MAP_SIZE", "lots", "--map-size"),
    ("TOOLNEXUS_GRACE", "soon", "--grace"),
])
def test_a_bad_environment_value_names_the_variable(name: str, value: str, flag: str, tmp_path: Path) -> None:
    """Before: 'argument --max-agents: invalid int value', naming a flag nobody passed."""
    done = serve("--data-dir", str(tmp_path / "d"), env={name: value})
    assert done.returncode == 2, done.stderr
    assert f"environment variable {name}={value!r} is not a valid value for {flag}" in done.stderr
    assert "fix or unset it" in done.stderr


def test_the_command_line_overrides_a_bad_environment_value(tmp_path: Path) -> None:
    """The flag wins over the variable, so a bad variable it overrides is no error (checked up to the
    next refusal: an address with no port)."""
    done = serve("--max-agents", "5", "--listen", "localhost", "--data-dir", str(tmp_path / "d"),
                 env={"TOOLNEXUS_MAX_AGENTS": "abc"})
    assert done.returncode == 2 and "TOOLNEXUS_MAX_AGENTS" not in done.stderr
    assert "the port is missing" in done.stderr


def test_a_data_dir_that_is_a_file_says_so(tmp_path: Path) -> None:
    """Before: 'cannot create data directory ...: [Errno 17] File exists'."""
    afile = tmp_path / "state"
    afile.write_text("not a directory")
    done = serve("--data-dir", str(afile))
    assert done.returncode == 2 and f"--data-dir {afile} is a file, not a directory" in done.stderr
    done = serve("--data-dir", str(afile / "inner"))
    assert done.returncode == 2 and f"is under {afile}, which is a file" in done.stderr


def test_serve_version(tmp_path: Path) -> None:
    """Before: 'unrecognized arguments: --version'."""
    for flag in ("--version", "-V"):
        done = serve(flag)
        assert done.returncode == 0 and done.stdout.strip() == f"toolnexus-daemon {__version__}"


def test_a_password_file_without_a_postgresql_store_is_refused(tmp_path: Path) -> None:
    """Before: the file was read by nobody and the daemon quietly ran on LMDB."""
    password = tmp_path / "pw"
    password.write_text("secret")
    done = serve("--data-dir", str(tmp_path / "d"), env={"TOOLNEXUS_STORE_PASSWORD_FILE": str(password)})
    assert done.returncode == 2 and "--store-password-file" in done.stderr
    assert "give --store postgresql://" in done.stderr and "secret" not in done.stderr


@pytest.mark.parametrize(("args", "message"), [
    (["--advertise", "127.0.0.1:7000"], "--advertise names a member of a cluster, whose daemons share one "
                                        "PostgreSQL database: give --store postgresql://... too"),
    (["--node-id", "n1"], "--node-id names a member of a cluster, whose daemons share one PostgreSQL"),
    (["--store", "postgresql://u@h/db", "--advertise", "nohost"], "--advertise 'nohost': want HOST:PORT"),
    (["--store", "postgresql://u@h/db", "--advertise", "h:1", "--lease-ms", "10"], "--lease-ms 10: want 300"),
])
def test_cluster_flags_say_what_they_need(args: list[str], message: str, tmp_path: Path) -> None:
    done = serve("--data-dir", str(tmp_path / "d"), *args)
    assert done.returncode == 2 and message in done.stderr, done.stderr
