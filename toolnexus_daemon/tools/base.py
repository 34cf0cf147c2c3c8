"""The tool-executor protocol the engine calls, one implementation per ToolDef source.

An executor never raises for a tool's own failure: a failed call is a
ToolResult with ``is_error`` (docs/protocol.md: failures cross boundaries as values).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from ..model import JSON, AgentDef, Answer, Request, ToolDef, ToolResult


@dataclass(frozen=True)
class ToolInvocation:
    runtime_id: str
    handle: str
    # unique within the daemon, stable across redelivery; workers deduplicate on it
    call_id: str
    tool: ToolDef
    arguments: JSON
    answer: Answer | None = None
    # source native: how long to wait for a connected worker to take the call
    take_timeout_ms: int = 30_000
    # the W3C trace context of the call's span, sent as the ``traceparent`` header ("" = none)
    traceparent: str = ""
    # the registry version of the calling handle, and whether it is the runtime's latest: a native
    # call goes to a worker that serves that version (docs/versions.md)
    version: int = 0
    latest: bool = True

    @property
    def action_id(self) -> str:
        """The call's id without its attempt suffix: one per action, the same on re-invocation."""
        return action_of(self.call_id)


_ATTEMPT = re.compile(r"a\d+$")


def action_of(call_id: str) -> str:
    """``<runtime>/<handle>/s<step>c<call>`` from a call id that may end in ``a<attempt>``."""
    return _ATTEMPT.sub("", call_id)


class OutcomeUnknown(Exception):
    """A call of an ``on_crash: "ask"`` tool was handed over and no result came back (its worker
    vanished, the service's connection broke or timed out after the request was sent): it may
    have acted. Raised only for ``ask`` tools; the engine asks (docs/protocol.md §11)."""


class ToolExecutor(Protocol):
    async def invoke(self, inv: ToolInvocation) -> ToolResult: ...


class Resolver(Protocol):
    """Answers a suspension inline on behalf of a handle with interpreter authority (``wait_for``)."""

    def available(self, runtime_id: str) -> bool:
        """Whether a resolver is connected for this runtime right now."""

    async def resolve(self, runtime_id: str, handle: str, call_id: str, request: Request,
                      take_timeout_ms: int) -> Answer | None:
        """The resolver's Answer, or None if none could take or finish the call (stay durable)."""


class ToolLister(Protocol):
    """Lists the tools of the MCP servers agents name, at ``New`` (docs/mcp.md)."""

    def problems(self, agents: Sequence[AgentDef]) -> list[str]:
        """What is wrong with the servers as named (before any is asked), one problem each."""

    async def expand(self, agents: Sequence[AgentDef]) -> list[AgentDef]:
        """The agents with their servers' tools added (UNAVAILABLE naming a server out of reach)."""
