"""Which agents the MCP server offers, and under which tool names.

Every agent of each ``--mcp-expose`` runtime's registry is a tool: named after the agent when one
runtime is exposed, ``<runtime>__<agent>`` when several are (so two runtimes' ``researcher`` stay
apart). The registry is read on every ``tools/list``, so agents added by a later ``New`` show up.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from ..errors import DaemonError
from .verbs import Verbs

SEPARATOR = "__"
PROMPT_SCHEMA = {"type": "object", "properties": {"prompt": {"type": "string",
                                                             "description": "what to ask the agent"}},
                 "required": ["prompt"]}
RESULT_SCHEMA = {"type": "object", "properties": {
    "status": {"type": "string"}, "text": {"type": "string"}, "turns": {"type": "integer"},
    "total_tokens": {"type": "integer"}}, "required": ["status", "text", "turns", "total_tokens"]}


@dataclass(frozen=True)
class Offered:
    """One agent offered as a tool."""

    tool: str
    runtime_id: str
    agent: str
    does: str


class Exposure:
    """The exposed runtimes, as the engine holds them now."""

    def __init__(self, verbs: Verbs, runtime_ids: tuple[str, ...]) -> None:
        self._verbs = verbs
        self.runtime_ids = runtime_ids

    def _name(self, runtime_id: str, agent: str) -> str:
        return f"{runtime_id}{SEPARATOR}{agent}" if len(self.runtime_ids) > 1 else agent

    async def offered(self) -> Iterator[Offered]:
        """Every agent of every exposed runtime that exists (one not created yet offers nothing)."""
        found: list[Offered] = []
        for rid in self.runtime_ids:
            try:
                agents = await self._verbs.agents(rid)
            except DaemonError:  # not created yet, or its owner unreachable: nothing to offer from it now
                continue
            found.extend(Offered(self._name(rid, name), rid, name, does) for name, does in agents)
        return iter(found)

    async def find(self, tool: str) -> Offered | None:
        for offered in await self.offered():
            if offered.tool == tool:
                return offered
        return None
