"""The MCP executor, loaded on first use.

Importing the official MCP SDK (and its pydantic models) costs about half a second of CPU, which
every daemon start paid although most runtimes name no MCP server. ``LazyMcpExecutor`` stands in
for ``tools.mcp.McpExecutor`` until a registry names a server (at ``New``, a reattach or a refresh)
or an MCP tool is called, and then hands everything to it. A daemon given ``--mcp-config`` loads
it at start: the operator asked for MCP, so its cost is paid before the first call.
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from ..config_mcp import McpConfig
from ..errors import FailedPrecondition
from ..model import AgentDef, McpServer, ToolResult
from .base import ToolInvocation

if TYPE_CHECKING:
    from .mcp import McpExecutor

log = logging.getLogger("toolnexus_daemon.tools")

NOT_INSTALLED = ("this daemon cannot list MCP servers: the mcp SDK is not installed "
                 "(pip install -r requirements.txt installs it); drop mcp_servers")

ToolsChanged = Callable[[Callable[[McpServer], bool]], None]


def sdk_installed() -> bool:
    """Whether the SDK can be found, without importing it (a start must not pay for it)."""
    return importlib.util.find_spec("mcp") is not None and importlib.util.find_spec("mcp_types") is not None


class LazyMcpExecutor:
    """``ToolExecutor`` for source ``mcp`` and the ``ToolLister`` of ``New``, loading the real
    executor the first time a registry or a call needs it."""

    def __init__(self, config: McpConfig | None, env: Mapping[str, str]) -> None:
        self._config = config
        self._env = env
        self._real: McpExecutor | None = None
        self._on_tools_changed: ToolsChanged | None = None
        if config is not None:
            self._load()

    @property
    def on_tools_changed(self) -> ToolsChanged | None:
        return self._on_tools_changed

    @on_tools_changed.setter
    def on_tools_changed(self, told: ToolsChanged | None) -> None:
        self._on_tools_changed = told
        if self._real is not None:
            self._real.on_tools_changed = told

    @property
    def loaded(self) -> bool:
        return self._real is not None

    def _load(self) -> McpExecutor:
        if self._real is None:
            try:
                from .mcp import McpExecutor
            except ImportError as exc:  # another major version of the SDK, or a broken install
                log.warning("MCP servers are unavailable: the mcp SDK cannot be loaded",
                            extra={"error": str(exc)})
                raise FailedPrecondition(NOT_INSTALLED) from exc
            self._real = McpExecutor(self._config, self._env)
            self._real.on_tools_changed = self._on_tools_changed
        return self._real

    def problems(self, agents: Sequence[AgentDef]) -> list[str]:
        if not any(agent.mcp_servers for agent in agents):
            return []
        try:
            return self._load().problems(agents)
        except FailedPrecondition as exc:
            return [str(exc)]

    async def expand(self, agents: Sequence[AgentDef]) -> list[AgentDef]:
        if not any(agent.mcp_servers for agent in agents):
            return list(agents)
        return await self._load().expand(agents)

    async def invoke(self, inv: ToolInvocation) -> ToolResult:
        return await self._load().invoke(inv)

    async def aclose(self) -> None:
        if self._real is not None:
            await self._real.aclose()
