"""Validation of a runtime's registry, LLM config and options.

``New`` must name every problem at once (docs/protocol.md §3), so each check appends to
a list instead of raising at the first one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ...envexpand import EnvAllowList, referenced
from ...errors import InvalidArgument
from ...model import AgentDef, LlmConfig, LlmStyle, McpServer, RuntimeOptions, ToolSource

NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
RUNTIME_ID_RE = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")
TASK_TOOL = "task"
# an MCP server's name leaves room in the 64 characters of ``<server>__<tool>``
MAX_MCP_NAME = 32
MCP_NAME_RE = re.compile(rf"^[A-Za-z0-9_-]{{1,{MAX_MCP_NAME}}}$")
HEADER_NAME_RE = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}$")
MAX_URL_CHARS = 2048
MAX_HEADERS = 32
MAX_HEADER_CHARS = 4096
MAX_MCP_TOOLS = 256
SUPPORTED_STYLES = {LlmStyle.OPENAI, LlmStyle.ANTHROPIC, LlmStyle.WORKER}
# the longest pending_ttl_ms: past a year a deadline is no deadline (and the sum must stay a date)
MAX_PENDING_TTL_MS = 366 * 24 * 3600 * 1000
VERSION_POLICIES = ("pinned", "latest")


def validate(agents: Sequence[AgentDef], llm: LlmConfig, options: RuntimeOptions,
             earlier: Sequence[str] = (), env_allow: EnvAllowList | None = None) -> None:
    """Raise InvalidArgument naming every problem (``earlier`` ones first), or return."""
    found = [*earlier, *problems(agents, llm, options)]
    if env_allow is not None:
        found += env_problems(agents, llm, env_allow)
    if found:
        numbered = "; ".join(f"{i}) {p}" for i, p in enumerate(found, 1))
        raise InvalidArgument(f"invalid registry: {numbered}")


def problems(agents: Sequence[AgentDef], llm: LlmConfig, options: RuntimeOptions) -> list[str]:
    """Every problem of the registry, LLM config and options, in a stable order."""
    problems: list[str] = []
    if not agents:
        problems.append("the registry has no agents")
    names = [a.name for a in agents]
    for dup in sorted({n for n in names if names.count(n) > 1}):
        problems.append(f'agent name "{dup}" is used more than once')
    for agent in agents:
        problems += _agent_problems(agent, set(names), llm)
    problems += _llm_problems(llm)
    for name in ("max_concurrent_turns", "inbox_cap", "close_grace_ms", "tool_timeout_ms",
                 "event_retention", "max_turns", "pending_ttl_ms", "version_grace_ms"):
        if getattr(options, name) < 0:
            problems.append(f"options.{name} must not be negative")
    if options.version_policy not in VERSION_POLICIES:
        problems.append(f'options.version_policy "{options.version_policy[:40]}" must be "pinned" '
                        '(the default) or "latest"')
    if options.pending_ttl_ms > MAX_PENDING_TTL_MS:
        problems.append(f"options.pending_ttl_ms {options.pending_ttl_ms} is more than a year "
                        f"({MAX_PENDING_TTL_MS}); set 0 for suspensions that never expire")
    return problems


def _agent_problems(agent: AgentDef, known: set[str], llm: LlmConfig) -> list[str]:
    if not NAME_RE.match(agent.name):
        return [f'agent name "{agent.name}" must be 1-64 letters, digits, "_" or "-"']
    out: list[str] = []
    where = f'agent "{agent.name}"'
    for member in agent.team:
        if member not in known:
            out.append(f'{where}: team names unknown agent "{member}"')
    tool_names = [t.name for t in agent.tools]
    for dup in sorted({n for n in tool_names if tool_names.count(n) > 1}):
        out.append(f'{where}: tool "{dup}" is defined more than once')
    for tool in agent.tools:
        if not tool.name:
            out.append(f"{where}: a tool has no name")
        elif tool.name == TASK_TOOL and agent.team:
            out.append(f'{where}: tool name "task" is reserved for delegation to the team')
        if tool.source in (ToolSource.WEBHOOK, ToolSource.HTTP) and not (tool.http and tool.http.url):
            out.append(f'{where}: tool "{tool.name}" has source {tool.source} but no http.url')
    out += mcp_problems(agent)
    if agent.model in ("", "inherit") and not llm.model and llm.style is not LlmStyle.WORKER:
        out.append(f'{where}: model "inherit" but llm.model is empty')
    for field_name in ("max_turns", "max_tokens", "max_tool_calls", "max_wall_ms", "max_children",
                       "max_concurrent", "max_depth"):
        if getattr(agent.budget, field_name) < 0:
            out.append(f"{where}: budget.{field_name} must not be negative")
    return out


def mcp_problems(agent: AgentDef) -> list[str]:
    """Every problem of an agent's ``mcp_servers``: names, URLs and headers bounded (docs/mcp.md)."""
    out: list[str] = []
    where = f'agent "{agent.name}"'
    names = [s.name for s in agent.mcp_servers]
    for dup in sorted({n for n in names if names.count(n) > 1}):
        out.append(f'{where}: mcp server "{dup}" is named more than once')
    for server in agent.mcp_servers:
        out += _mcp_server_problems(server, where)
    return out


def _mcp_server_problems(server: McpServer, where: str) -> list[str]:
    if not MCP_NAME_RE.match(server.name):
        return [f'{where}: mcp server name "{server.name[:64]}" must be 1-{MAX_MCP_NAME} letters, digits, '
                '"_" or "-" (its tools are offered as <server>__<tool>)']
    out: list[str] = []
    at = f'{where}: mcp server "{server.name}"'
    web = server.url.startswith(("http://", "https://"))
    if server.url and not (web and len(server.url) <= MAX_URL_CHARS):
        out.append(f"{at}: url must be an http:// or https:// URL of at most {MAX_URL_CHARS} characters "
                   "(a streamable-HTTP MCP endpoint)")
    if len(server.headers) > MAX_HEADERS:
        out.append(f"{at}: {len(server.headers)} headers; the limit is {MAX_HEADERS}")
    for name, value in server.headers.items():
        breaks = any(c in value for c in "\r\n\0")
        if not HEADER_NAME_RE.match(name) or len(value) > MAX_HEADER_CHARS or breaks:
            out.append(f'{at}: header "{name[:64]}" must be a token of at most 64 characters with a value '
                       f"of at most {MAX_HEADER_CHARS} characters and no line breaks")
    if len(server.tools) > MAX_MCP_TOOLS:
        out.append(f"{at}: tools lists {len(server.tools)} names; the limit is {MAX_MCP_TOOLS}")
    for tool in server.tools:
        if not tool or len(tool) > 128:
            out.append(f'{at}: tools names "{tool[:64]}", which is not 1-128 characters')
    if server.timeout_ms < 0:
        out.append(f"{at}: timeout_ms must not be negative (0 = the default)")
    return out


def _llm_problems(llm: LlmConfig) -> list[str]:
    if llm.style not in SUPPORTED_STYLES:
        return [f'llm.style "{llm.style}" is not supported by this daemon (use openai, anthropic or worker)']
    http_style = llm.style in (LlmStyle.OPENAI, LlmStyle.ANTHROPIC)
    if http_style and llm.base_url and not llm.base_url.startswith(("http://", "https://")):
        return [f'llm.base_url "{llm.base_url}" must be an http:// or https:// URL for style {llm.style}']
    return []


def env_problems(agents: Sequence[AgentDef], llm: LlmConfig, allow: EnvAllowList) -> list[str]:
    """Every environment variable the registry would read that the operator did not allow."""
    uses = [(f"llm.headers ${{{n}}}", n) for n in referenced(llm.headers)]
    if llm.api_key_env:
        uses.append(("llm.api_key_env", llm.api_key_env))
    for agent in agents:
        for tool in agent.tools:
            if tool.http is not None:
                where = f'agent "{agent.name}" tool "{tool.name}" http.headers'
                uses += [(f"{where} ${{{n}}}", n) for n in referenced(tool.http.headers)]
        for server in agent.mcp_servers:
            where = f'agent "{agent.name}" mcp server "{server.name}" headers'
            uses += [(f"{where} ${{{n}}}", n) for n in referenced(server.headers)]
    return [f"{where} names environment variable {name}, which the daemon does not allow; the "
            f"operator allows it with --allow-env {name} (or TOOLNEXUS_ALLOW_ENV)"
            for where, name in uses if not allow.permits(name)]


def validate_runtime_id(runtime_id: str) -> None:
    if not RUNTIME_ID_RE.match(runtime_id):
        raise InvalidArgument(
            f'runtime_id "{runtime_id[:80]}" must be 1-128 letters, digits, ".", "_" or "-"')
