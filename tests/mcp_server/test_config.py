"""The MCP server's flags: both or neither, loopback unless TLS or --insecure, runtime ids checked."""

from __future__ import annotations

import pytest

from toolnexus_daemon.config import load


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str], says: str) -> None:
    with pytest.raises(SystemExit) as err:
        load(argv, {})
    assert err.value.code == 2
    assert says in capsys.readouterr().err


def test_a_bare_port_means_loopback_and_exposures_repeat() -> None:
    mcp = load(["--mcp-listen", "8765", "--mcp-expose", "a", "--mcp-expose", "b"], {}).mcp
    assert mcp is not None and (mcp.listen, mcp.expose) == ("127.0.0.1:8765", ("a", "b"))
    assert load([], {}).mcp is None
    shown = load(["--mcp-listen", ":0", "--mcp-expose", "a"], {}).redacted()
    assert (shown["mcp-listen"], shown["mcp-expose"]) == ("127.0.0.1:0", "a")


def test_unsafe_or_incomplete_mcp_settings_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    _refused(["--mcp-expose", "a"], capsys, "--mcp-expose needs --mcp-listen")
    _refused(["--mcp-listen", "0"], capsys, "needs at least one --mcp-expose")
    _refused(["--mcp-listen", "192.0.2.7:8765", "--mcp-expose", "a"], capsys, "needs TLS")
    _refused(["--mcp-listen", "0", "--mcp-expose", "a b"], capsys, "a runtime id is")
    _refused(["--mcp-listen", "0", "--mcp-expose", "a", "--mcp-expose", "a"], capsys, "twice")
    _refused(["--mcp-listen", "host:port", "--mcp-expose", "a"], capsys, "want HOST:PORT")
    assert load(["--mcp-listen", "192.0.2.7:8765", "--mcp-expose", "a", "--insecure"], {}).mcp is not None
