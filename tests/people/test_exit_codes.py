"""Exit codes scripts rely on: unreachable 4, unauthenticated 5, not allowed 6, usage 2; and the
target and token found in the environment as the clients find them."""

from __future__ import annotations

from pathlib import Path

from toolnexus_devtools import ScriptedModelServer

from .conftest import TOKEN, Daemon, authed, clean_env, closed_port, run_cli, suspend


def test_nobody_at_the_target_exits_4(tmp_path: Path) -> None:
    tcp = run_cli("inspect", "rt", "--target", f"127.0.0.1:{closed_port()}", "--timeout", "5")
    unix = run_cli("events", "rt", "--target", f"unix:{tmp_path}/none.sock", "--timeout", "5")
    assert (tcp.returncode, unix.returncode) == (4, 4)
    assert "no daemon answered at 127.0.0.1:" in tcp.stderr and "UNAVAILABLE" in tcp.stderr
    assert f"unix:{tmp_path}/none.sock" in unix.stderr


def test_a_wrong_or_missing_token_exits_5(daemon: Daemon, tmp_path: Path) -> None:
    wrong = tmp_path / "wrong"
    wrong.write_text("not-the-token")
    by_file = run_cli("inspect", "rt", "--target", daemon.target, "--token-file", str(wrong))
    by_env = run_cli("inspect", "rt", "--target", daemon.target, env=clean_env(TOOLNEXUS_TOKEN="nope"))
    missing = run_cli("inspect", "rt", "--target", daemon.target)
    assert (by_file.returncode, by_env.returncode, missing.returncode) == (5, 5, 5)
    assert "UNAUTHENTICATED" in by_file.stderr


def test_target_and_token_come_from_the_environment(daemon: Daemon, model: ScriptedModelServer) -> None:
    rid, handle, _ = suspend(daemon, model)
    out = run_cli("inspect", rid, env=clean_env(TOOLNEXUS_TARGET=daemon.target, TOOLNEXUS_TOKEN=TOKEN))
    assert out.returncode == 0, out.stderr
    assert handle in out.stdout


def test_a_keyed_runtime_needs_its_key_exits_6_without(daemon: Daemon, model: ScriptedModelServer) -> None:
    rid, handle, _ = suspend(daemon, model, key="k-123")
    without = run_cli(*authed(daemon, "inspect", rid))
    wrong = run_cli(*authed(daemon, "inspect", rid, "--runtime-key", "other"))
    with_flag = run_cli(*authed(daemon, "inspect", rid, "--runtime-key", "k-123"))
    with_env = run_cli(*authed(daemon, "inspect", rid), env=clean_env(TOOLNEXUS_RUNTIME_KEY="k-123"))
    assert (without.returncode, wrong.returncode) == (6, 6)
    assert "PERMISSION_DENIED" in without.stderr
    assert (with_flag.returncode, with_env.returncode) == (0, 0), with_flag.stderr
    assert handle in with_flag.stdout and handle in with_env.stdout


def test_an_unreadable_token_file_or_bad_flag_exits_2(daemon: Daemon, tmp_path: Path) -> None:
    no_file = run_cli("inspect", "rt", "--target", daemon.target, "--token-file", str(tmp_path / "absent"))
    bad_flag = run_cli("pending", "--bogus")
    negative = run_cli(*authed(daemon, "events", "rt", "--after", "-1"))
    assert (no_file.returncode, bad_flag.returncode, negative.returncode) == (2, 2, 2)
    assert "--token-file" in no_file.stderr and "No such file" in no_file.stderr


def test_help_documents_the_exit_codes() -> None:
    for command in ("runtimes", "pending", "inspect", "answer", "events"):
        out = run_cli(command, "--help")
        assert out.returncode == 0
        assert "4  daemon unreachable" in out.stdout and "5  unauthenticated" in out.stdout, command
    top = run_cli("--help")
    assert all(c in top.stdout for c in ("runtimes", "pending", "inspect", "answer", "events"))
