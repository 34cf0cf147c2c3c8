"""The MCP SDK is imported when a registry or a call needs it, not at every daemon start.

Importing the SDK costs about half a second of CPU; most runtimes name no MCP server. The daemon's
composition root must not import it, a registry without ``mcp_servers`` must not load it, and the
first registry that names a server (or ``--mcp-config`` at start) loads it and is served as before
(the MCP suites beside this file run their daemons through the same lazy executor).
"""

from __future__ import annotations

import subprocess
import sys

from toolnexus_daemon.config_mcp import McpConfig
from toolnexus_daemon.model import AgentDef, McpServer
from toolnexus_daemon.tools.mcp_lazy import LazyMcpExecutor

# the daemon's composition root as `serve` runs it: flags, then the executors (_mcp_executor)
CHECK = """
import sys, tempfile
from toolnexus_daemon import app, config
settings = config.load(["--data-dir", tempfile.mkdtemp()], {})
executor = app._mcp_executor(settings, {})
print(type(executor).__name__, sorted(m for m in ("mcp", "mcp_types") if m in sys.modules))
"""


def test_the_composition_root_imports_no_mcp_sdk() -> None:
    out = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, timeout=60,
                         check=True)
    assert out.stdout.strip() == "LazyMcpExecutor []", out.stdout


async def test_a_registry_without_mcp_servers_leaves_the_sdk_unloaded() -> None:
    lazy = LazyMcpExecutor(None, {})
    plain = [AgentDef(name="a", does="d")]
    assert lazy.problems(plain) == [] and await lazy.expand(plain) == plain
    assert not lazy.loaded
    await lazy.aclose()


def test_a_registry_naming_a_server_loads_it_and_keeps_the_listener_told() -> None:
    told: list[object] = []
    lazy = LazyMcpExecutor(None, {})
    lazy.on_tools_changed = told.append
    problems = lazy.problems([AgentDef(name="a", does="d", mcp_servers=(McpServer("nowhere"),))])
    assert lazy.loaded
    assert len(problems) == 1 and "started without --mcp-config" in problems[0]
    assert lazy._real is not None and lazy._real.on_tools_changed == told.append


def test_an_operator_config_loads_it_at_start() -> None:
    assert LazyMcpExecutor(McpConfig(path="mcp.json", servers={}), {}).loaded
