"""Declaring agents, tools, budgets and the model: the registry a runtime is built from.

These are the user's vocabulary (``agent(...)``, ``Tool(...)``, ``registry(...)``)
and stay free of protobuf; ``_convert`` turns them into ``AgentDef``/``LlmConfig``.
Validation that needs no daemon (duplicate agents, one tool name bound to two
different callables, an http tool without a URL) fails here, at declaration,
with a ValueError; everything else is the daemon's INVALID_ARGUMENT.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from ._types import JSON, Context

Execute = Callable[[JSON, Context], Any]
"""A native tool body: ``execute(args, ctx)`` returning str, ToolResult or dict."""

TOOL_SOURCES = ("native", "webhook", "http")
# what a call in flight at a daemon crash becomes: sent again, or asked about (docs/protocol.md §11)
ON_CRASH = ("rerun", "ask")


@dataclass(frozen=True)
class HttpSpec:
    """Where the daemon sends a ``webhook``/``http`` tool call; header values may hold ``${ENV}``."""

    url: str
    method: str = "POST"
    headers: Mapping[str, str] = field(default_factory=dict)
    query: tuple[str, ...] = ()
    timeout_ms: int = 0


@dataclass(frozen=True)
class Tool:
    """A tool an agent uses.

    ``Tool(name, description, input_schema, execute)`` is a *native* tool: the
    daemon relays each call to this client, which runs ``execute(args, ctx)``.
    A native tool without ``execute`` is served by some other worker. Use
    ``Tool.webhook`` / ``Tool.http`` for tools the daemon calls over HTTP itself
    (their endpoint lives in ``endpoint``, the proto's ``ToolDef.http``).
    """

    name: str
    description: str = ""
    input_schema: JSON | None = None
    execute: Execute | None = None
    source: str = "native"
    endpoint: HttpSpec | None = None
    # total time one call may take, dispatch to result; 0 = the daemon's --tool-deadline-ms
    deadline_ms: int = 0
    # "ask": a call in flight at a crash (or whose worker vanished) is not sent again; the handle
    # suspends on a ``reconcile`` request asking whether it completed. Key side effects by
    # ``ctx.call_id``: a re-dispatch of the same call carries the same one.
    on_crash: str = "rerun"
    # its suspensions get Request.answer_url (the daemon needs --answers-listen)
    answer_link: bool = False

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("a tool needs a name")
        if self.on_crash not in ON_CRASH:
            raise ValueError(f"tool {self.name!r}: on_crash must be one of {', '.join(ON_CRASH)}")
        if self.deadline_ms < 0:
            raise ValueError(f"tool {self.name!r}: deadline_ms must not be negative")
        if self.source not in TOOL_SOURCES:
            raise ValueError(f"tool {self.name!r}: source must be one of {', '.join(TOOL_SOURCES)}")
        if self.source != "native" and (self.endpoint is None or not self.endpoint.url):
            raise ValueError(f"tool {self.name!r}: a {self.source} tool needs a url")
        if self.source != "native" and self.execute is not None:
            raise ValueError(f"tool {self.name!r}: only a native tool has an execute callable")

    @classmethod
    def webhook(cls, name: str, url: str, description: str = "", input_schema: JSON | None = None,
                headers: Mapping[str, str] | None = None, timeout_ms: int = 0,
                on_crash: str = "rerun") -> Tool:
        """A tool the daemon POSTs ``{call_id, runtime_id, handle, tool, arguments, answer}`` to."""
        spec = HttpSpec(url=url, method="POST", headers=dict(headers or {}), timeout_ms=timeout_ms)
        return cls(name, description, input_schema, source="webhook", endpoint=spec, on_crash=on_crash)

    @classmethod
    def http(cls, name: str, url: str, method: str = "GET", query: Iterable[str] = (),
             headers: Mapping[str, str] | None = None, description: str = "",
             input_schema: JSON | None = None, timeout_ms: int = 0, on_crash: str = "rerun") -> Tool:
        """A plain REST endpoint: ``{placeholder}`` URL args, ``query`` args, the rest as JSON body."""
        spec = HttpSpec(url=url, method=method.upper(), headers=dict(headers or {}), query=tuple(query),
                        timeout_ms=timeout_ms)
        return cls(name, description, input_schema, source="http", endpoint=spec, on_crash=on_crash)


@dataclass(frozen=True)
class McpServer:
    """An MCP server whose tools an agent gets, offered to the model as ``<name>__<tool>``.

    ``url`` names a streamable-HTTP server (header values may hold ``${ENV}`` of names the daemon
    allows); without it the daemon looks ``name`` up in its operator's ``--mcp-config`` file (the
    only place a stdio server can be named). ``tools`` limits which of its tools are offered.
    """

    name: str
    url: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    tools: tuple[str, ...] = ()
    timeout_ms: int = 0
    on_crash: str = "rerun"

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("an MCP server needs a name")
        if self.on_crash not in ON_CRASH:
            raise ValueError(f"mcp server {self.name!r}: on_crash must be one of {', '.join(ON_CRASH)}")
        if self.timeout_ms < 0:
            raise ValueError(f"mcp server {self.name!r}: timeout_ms must not be negative")
        object.__setattr__(self, "tools", tuple(self.tools))

    @classmethod
    def of(cls, value: McpServer | str | Mapping[str, Any]) -> McpServer:
        """An ``McpServer``, a bare name (from ``--mcp-config``) or a mapping of its fields."""
        if isinstance(value, McpServer):
            return value
        if isinstance(value, str):
            return cls(value)
        return cls(**_known_keys(cls, value, "mcp server"))


@dataclass(frozen=True)
class Budget:
    """Per-handle limits; 0 = unset (docs/protocol.md §3)."""

    max_turns: int = 0
    max_tokens: int = 0
    max_tool_calls: int = 0
    max_wall_ms: int = 0
    max_children: int = 0
    max_concurrent: int = 0
    max_depth: int = 0

    @classmethod
    def of(cls, value: Budget | Mapping[str, int] | None) -> Budget | None:
        if value is None or isinstance(value, Budget):
            return value
        return cls(**_known_keys(cls, value, "budget"))


@dataclass(frozen=True)
class Llm:
    """The model configuration; style ``openai``, ``anthropic`` or ``worker`` (served by this client)."""

    style: str = "openai"
    base_url: str = ""
    model: str = ""
    api_key_env: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    retries: int = 0
    timeout_ms: int = 0
    stream: bool = False
    request_params: JSON | None = None
    max_tokens: int = 0

    @classmethod
    def of(cls, value: Llm | Mapping[str, Any]) -> Llm:
        return value if isinstance(value, Llm) else cls(**_known_keys(cls, value, "llm"))


@dataclass(frozen=True)
class AgentSpec:
    """One agent of a registry; build it with ``agent(...)``."""

    name: str
    does: str = ""
    model: str = "inherit"
    soul: str = ""
    tools: tuple[Tool, ...] = ()
    team: tuple[str, ...] = ()
    budget: Budget | None = None
    wait_for: bool = False
    request_params: JSON | None = None
    # its suspensions (of every tool) get Request.answer_url
    answer_link: bool = False
    mcp_servers: tuple[McpServer, ...] = ()


def agent(name: str, does: str = "", uses: Mapping[str, Iterable[Any]] | None = None, model: str = "inherit",
          soul: str = "", team: Iterable[str] = (), budget: Budget | Mapping[str, int] | None = None,
          wait_for: bool = False, request_params: JSON | None = None, answer_link: bool = False,
          mcp_servers: Iterable[McpServer | str | Mapping[str, Any]] = ()) -> AgentSpec:
    """Declare an agent; ``uses={"tools": [Tool, ...], "team": [names], "mcp_servers": [McpServer, ...]}``
    (or the team as ``team=``, the MCP servers as ``mcp_servers=``)."""
    uses = dict(uses or {})
    unknown = sorted(set(uses) - {"tools", "team", "mcp_servers"})
    if unknown:
        raise ValueError(f"agent {name!r}: uses takes 'tools', 'team' and 'mcp_servers', "
                         f"not {', '.join(unknown)}")
    servers = tuple(McpServer.of(s) for s in [*uses.get("mcp_servers", ()), *mcp_servers])
    names = [s.name for s in servers]
    for dup in sorted({n for n in names if names.count(n) > 1}):
        raise ValueError(f"agent {name!r}: mcp server {dup!r} is named more than once")
    tools = tuple(uses.get("tools", ()))
    for tool in tools:
        if not isinstance(tool, Tool):
            raise TypeError(f"agent {name!r}: uses['tools'] holds Tool values, got {type(tool).__name__}")
    members = tuple(dict.fromkeys([*uses.get("team", ()), *team]))
    return AgentSpec(name=name, does=does, model=model or "inherit", soul=soul, tools=tools, team=members,
                     budget=Budget.of(budget), wait_for=wait_for, request_params=request_params,
                     answer_link=answer_link, mcp_servers=servers)


@dataclass(frozen=True)
class Registry:
    """The agents a runtime knows, in declaration order."""

    agents: tuple[AgentSpec, ...]

    def names(self) -> list[str]:
        return [a.name for a in self.agents]

    def native_tools(self) -> dict[str, Tool]:
        """Native tools with an execute callable, by name: what this client serves over Connect."""
        served: dict[str, Tool] = {}
        for spec in self.agents:
            for tool in spec.tools:
                if tool.source != "native" or tool.execute is None:
                    continue
                known = served.setdefault(tool.name, tool)
                if known.execute is not tool.execute:
                    raise ValueError(f"tool {tool.name!r} is bound to two different execute callables")
        return served


def registry(*agents: AgentSpec | Iterable[AgentSpec]) -> Registry:
    """A registry of agents (``registry(a, b)`` or ``registry([a, b])``); agent names must be unique."""
    flat: list[AgentSpec] = []
    for item in agents:
        flat.extend([item] if isinstance(item, AgentSpec) else item)
    seen: set[str] = set()
    for spec in flat:
        if spec.name in seen:
            raise ValueError(f"agent {spec.name!r} is declared twice")
        seen.add(spec.name)
    result = Registry(tuple(flat))
    result.native_tools()  # fail at declaration on a tool name bound twice
    return result


def _known_keys(cls: type, value: Mapping[str, Any], what: str) -> dict[str, Any]:
    allowed = {f.name for f in fields(cls)}
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise ValueError(f"unknown {what} key(s): {', '.join(unknown)} (known: {', '.join(sorted(allowed))})")
    return dict(value)
