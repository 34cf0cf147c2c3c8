"""``NewRequest`` -> the runtime's registry (agents, LLM config, options) and its validation.

Split from ``api.convert`` because converting a registry is also checking
it: an unknown tool source or LLM style cannot become a domain value, so it is
collected as a problem here. ``New`` must name every problem at once (docs/protocol.md
§3), so when this layer finds any, the engine's own registry checks run on
the rest and one INVALID_ARGUMENT lists them all.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..config import Limits
from ..engine.definitions.validate import validate
from ..errors import InvalidArgument
from ..model import (
    AgentDef,
    Budget,
    HttpConfig,
    LlmConfig,
    LlmStyle,
    McpServer,
    OnCrash,
    RuntimeOptions,
    ToolDef,
    ToolSource,
)
from ._gen import runtime_pb2 as pb
from .convert import from_struct, optional_struct
from .limits import registry_problems

DEFAULT_RETRIES = 3
DEFAULT_TIMEOUT_MS = 60_000


@dataclass(frozen=True)
class Registry:
    agents: list[AgentDef]
    llm: LlmConfig
    options: RuntimeOptions


def registry_from(req: pb.NewRequest, limits: Limits | None = None) -> Registry:
    """The registry of a ``New`` call; INVALID_ARGUMENT naming every problem found.

    With ``limits``, the registry-size limits are problems too, and a runtime
    that sets no ``event_retention`` gets the daemon's ``--event-retention``.
    """
    problems: list[str] = registry_problems(limits, req) if limits is not None else []
    agents = [_agent(a, problems) for a in req.agents]
    llm = _llm(req.llm, problems)
    options = options_from(req.options, limits.event_retention if limits is not None else 0)
    if problems:
        validate(agents, llm, options, earlier=problems)
    return Registry(agents, llm, options)


def budget_from(msg: pb.Budget) -> Budget:
    return Budget(max_turns=msg.max_turns, max_tokens=msg.max_tokens, max_tool_calls=msg.max_tool_calls,
                  max_wall_ms=msg.max_wall_ms, max_children=msg.max_children,
                  max_concurrent=msg.max_concurrent, max_depth=msg.max_depth)


def spawn_budget(msg: pb.SpawnRequest) -> Budget | None:
    """The optional budget of a Spawn; negative fields are INVALID_ARGUMENT."""
    if not msg.HasField("budget"):
        return None
    budget = budget_from(msg.budget)
    negative = [name for name, value in vars(budget).items() if value < 0]
    if negative:
        raise InvalidArgument(f"budget.{', budget.'.join(negative)} must not be negative (0 = unset)")
    return budget


def options_from(msg: pb.RuntimeOptions, default_retention: int = 0) -> RuntimeOptions:
    """Runtime options; a 0 field takes the default of docs/protocol.md §2 (event retention: the daemon's)."""
    return RuntimeOptions.from_json({
        "max_concurrent_turns": msg.max_concurrent_turns, "inbox_cap": msg.inbox_cap,
        "close_grace_ms": msg.close_grace_ms, "tool_timeout_ms": msg.tool_timeout_ms,
        "wait_for": msg.wait_for, "event_retention": msg.event_retention or default_retention,
        "max_turns": msg.max_turns, "pending_ttl_ms": msg.pending_ttl_ms, "answer_link": msg.answer_link,
        "version_policy": msg.version_policy, "version_grace_ms": msg.version_grace_ms})


def _agent(msg: pb.AgentDef, problems: list[str]) -> AgentDef:
    where = f'agent "{msg.name}"'
    return AgentDef(name=msg.name, does=msg.does, model=msg.model or "inherit", soul=msg.soul,
                    tools=tuple(_tool(t, where, problems) for t in msg.tools), team=tuple(msg.team),
                    budget=budget_from(msg.budget), wait_for=msg.wait_for,
                    request_params=optional_struct(msg, "request_params") or {}, answer_link=msg.answer_link,
                    mcp_servers=tuple(_mcp_server(m, where, problems) for m in msg.mcp_servers))


def _mcp_server(msg: pb.McpServer, where: str, problems: list[str]) -> McpServer:
    """One ``McpServer``; its bounds are the engine's checks (``engine.registry``)."""
    on_crash = {c.value: c for c in OnCrash}.get(msg.on_crash or OnCrash.RERUN.value)
    if on_crash is None:
        problems.append(f'{where}: mcp server "{msg.name[:64]}" has unknown on_crash "{msg.on_crash[:40]}" '
                        '(use "rerun" or "ask")')
    return McpServer(name=msg.name, url=msg.url, headers=dict(msg.headers), tools=tuple(msg.tools),
                     timeout_ms=msg.timeout_ms, on_crash=on_crash or OnCrash.RERUN)


def _tool(msg: pb.ToolDef, where: str, problems: list[str]) -> ToolDef:
    # source mcp is the daemon's own, given to the tools it lists from an agent's mcp_servers
    sources = {s.value: s for s in ToolSource if s is not ToolSource.MCP}
    source = sources.get(msg.source or ToolSource.NATIVE.value)
    if source is None:
        problems.append(f'{where}: tool "{msg.name}" has unknown source "{msg.source}" '
                        f"(use {', '.join(sources)})")
    http = _http(msg.http, f'{where}: tool "{msg.name}"', problems) if msg.HasField("http") else None
    if msg.deadline_ms < 0:
        problems.append(f'{where}: tool "{msg.name}" deadline_ms must not be negative (0 = the default)')
    on_crash = {c.value: c for c in OnCrash}.get(msg.on_crash or OnCrash.RERUN.value)
    if on_crash is None:
        problems.append(f'{where}: tool "{msg.name}" has unknown on_crash "{msg.on_crash[:40]}" '
                        '(use "rerun" or "ask")')
    return ToolDef(name=msg.name, description=msg.description,
                   input_schema=from_struct(msg.input_schema), source=source or ToolSource.NATIVE, http=http,
                   deadline_ms=max(0, msg.deadline_ms), answer_link=msg.answer_link,
                   on_crash=on_crash or OnCrash.RERUN)


def _http(msg: pb.HttpConfig, where: str, problems: list[str]) -> HttpConfig:
    if msg.timeout_ms < 0:
        problems.append(f"{where}: http.timeout_ms must not be negative (0 = the default)")
    return HttpConfig(method=msg.method, url=msg.url, headers=dict(msg.headers), query=tuple(msg.query),
                      timeout_ms=max(0, msg.timeout_ms))


def _llm(msg: pb.LlmConfig, problems: list[str]) -> LlmConfig:
    styles = {s.value: s for s in LlmStyle}
    style = styles.get(msg.style or LlmStyle.OPENAI.value)
    if style is None:
        problems.append(f'unknown llm.style "{msg.style}" (use {", ".join(styles)})')
    if msg.retries < -1:
        problems.append("llm.retries must be -1 (no retries), 0 (the default, 3) or a positive count")
    for name in ("timeout_ms", "max_tokens"):
        if getattr(msg, name) < 0:
            problems.append(f"llm.{name} must not be negative (0 = the default)")
    return LlmConfig(style=style or LlmStyle.OPENAI, base_url=msg.base_url, model=msg.model,
                     api_key_env=msg.api_key_env, headers=dict(msg.headers),
                     retries=msg.retries or DEFAULT_RETRIES, timeout_ms=msg.timeout_ms or DEFAULT_TIMEOUT_MS,
                     stream=msg.stream, request_params=optional_struct(msg, "request_params") or {},
                     max_tokens=max(0, msg.max_tokens))
