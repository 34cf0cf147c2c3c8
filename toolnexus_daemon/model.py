"""Domain types shared by the engine, the store, the transports and the API edge.

Plain frozen-ish dataclasses with ``to_json``/``from_json`` so the store can
persist them and the API can convert them without either knowing the other.
The pinned vocabularies of docs/protocol.md §2 live here as StrEnums.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
from enum import StrEnum
from typing import Any

JSON = dict[str, Any]


class HandleState(StrEnum):
    IDLE = "idle"
    RUNNING = "running"
    SUSPENDED = "suspended"
    CLOSED = "closed"


class Status(StrEnum):
    DONE = "done"
    PENDING = "pending"
    INCOMPLETE = "incomplete"
    INTERRUPTED = "interrupted"
    CLOSED = "closed"
    TIMEOUT = "timeout"
    ERROR = "error"


class EventType(StrEnum):
    TRANSITION = "transition"
    PENDING = "pending"
    RESUMED = "resumed"
    RESULT = "result"
    SPAWNED = "spawned"
    CLOSED = "closed"
    TOOL_CALL = "tool_call"
    TOOL_RESULT = "tool_result"
    MODEL_CALL = "model_call"
    REATTACH = "reattach"
    ESCALATE = "escalate"
    POST = "post"
    TEXT = "text"


class ToolSource(StrEnum):
    NATIVE = "native"
    WEBHOOK = "webhook"
    HTTP = "http"
    # a tool listed from an MCP server at New (docs/mcp.md); never set by a caller
    MCP = "mcp"


class OnCrash(StrEnum):
    """What a call in flight at a crash becomes (docs/protocol.md §11): sent again, or asked about."""

    RERUN = "rerun"
    ASK = "ask"


class LlmStyle(StrEnum):
    OPENAI = "openai"
    ANTHROPIC = "anthropic"
    WORKER = "worker"


ROOT_ID = "root"


def _drop_empty(d: JSON) -> JSON:
    return {k: v for k, v in d.items() if v is not None}


def _copied(data: JSON | None) -> JSON | None:
    """A deep copy of JSON data (what ``asdict`` gave), so a record never aliases a live value."""
    if data is None:
        return None
    return {k: _copied_value(v) for k, v in data.items()}


def _copied_value(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _copied_value(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_copied_value(x) for x in v]
    return v


@dataclass(frozen=True)
class Request:
    """An out-of-band question a suspended tool waits on (docs/protocol.md §2)."""

    id: str
    kind: str
    prompt: str
    url: str | None = None
    data: JSON | None = None
    expires_at: str | None = None
    # an answer link (docs/protocol.md §10): it holds the link's secret token, so it lives only in
    # memory and is announced live; ``to_json`` (what the store keeps) leaves it out on purpose
    answer_url: str | None = field(default=None, compare=False)

    def to_json(self) -> JSON:
        # by hand, not dataclasses.asdict: this runs for every suspended handle in every commit
        return _drop_empty({"id": self.id, "kind": self.kind, "prompt": self.prompt, "url": self.url,
                            "data": _copied(self.data), "expires_at": self.expires_at})

    @classmethod
    def from_json(cls, d: JSON) -> Request:
        return cls(
            id=str(d.get("id") or ""), kind=str(d.get("kind") or ""), prompt=str(d.get("prompt") or ""),
            url=d.get("url") or None, data=d.get("data") or None,
            expires_at=d.get("expires_at") or d.get("expiresAt") or None,
        )


@dataclass(frozen=True)
class Answer:
    """The resolution of a Request, routed by ``id`` (docs/protocol.md §1 point 2)."""

    id: str
    ok: bool
    data: JSON | None = None
    reason: str | None = None

    def to_json(self) -> JSON:
        return _drop_empty({"id": self.id, "ok": self.ok, "data": _copied(self.data), "reason": self.reason})

    @classmethod
    def from_json(cls, d: JSON) -> Answer:
        return cls(id=str(d.get("id") or ""), ok=bool(d.get("ok")), data=d.get("data") or None,
                   reason=d.get("reason") or None)


@dataclass(frozen=True)
class ToolResult:
    """What one tool execution returned; ``pending`` set means it suspends."""

    output: str
    is_error: bool = False
    metadata: JSON | None = None
    pending: Request | None = None

    def to_json(self) -> JSON:
        d: JSON = {"output": self.output, "is_error": self.is_error}
        if self.metadata:
            d["metadata"] = self.metadata
        if self.pending is not None:
            d["pending"] = self.pending.to_json()
        return d

    @classmethod
    def from_json(cls, d: JSON) -> ToolResult:
        pending = d.get("pending")
        return cls(output=str(d.get("output") or ""), is_error=bool(d.get("is_error")),
                   metadata=d.get("metadata") or None,
                   pending=Request.from_json(pending) if pending else None)


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    # some of these tokens were estimated: a server sent no usage (never a silent 0)
    estimated: bool = False

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.prompt_tokens + other.prompt_tokens,
                     self.completion_tokens + other.completion_tokens,
                     self.total_tokens + other.total_tokens, self.estimated or other.estimated)

    def to_json(self) -> JSON:
        d: JSON = {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                   "total_tokens": self.total_tokens}
        if self.estimated:
            d["estimated"] = True
        return d

    @classmethod
    def from_json(cls, d: JSON | None) -> Usage:
        d = d or {}
        return cls(int(d.get("prompt_tokens") or 0), int(d.get("completion_tokens") or 0),
                   int(d.get("total_tokens") or 0), bool(d.get("estimated")))


@dataclass(frozen=True)
class TaskResult:
    """The uniform result crossing a handle boundary — never an exception."""

    status: Status
    text: str
    is_error: bool
    pending: Request | None = None
    turns: int = 0
    total_tokens: int = 0
    limit: str | None = None
    usage_estimated: bool = False

    def to_json(self) -> JSON:
        d: JSON = {"status": str(self.status), "text": self.text, "is_error": self.is_error,
                   "turns": self.turns, "total_tokens": self.total_tokens}
        if self.usage_estimated:
            d["usage_estimated"] = True
        if self.pending is not None:
            d["pending"] = self.pending.to_json()
        if self.limit:
            d["limit"] = self.limit
        return d

    @classmethod
    def from_json(cls, d: JSON) -> TaskResult:
        pending = d.get("pending")
        return cls(status=Status(d["status"]), text=str(d.get("text") or ""),
                   is_error=bool(d.get("is_error")),
                   pending=Request.from_json(pending) if pending else None,
                   turns=int(d.get("turns") or 0), total_tokens=int(d.get("total_tokens") or 0),
                   limit=d.get("limit") or None, usage_estimated=bool(d.get("usage_estimated")))


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

    def to_json(self) -> JSON:
        return {f.name: v for f in _BUDGET_FIELDS if (v := getattr(self, f.name))}

    @classmethod
    def from_json(cls, d: JSON | None) -> Budget:
        d = d or {}
        return cls(**{f.name: int(d.get(f.name) or 0) for f in fields(cls)})

    def merged(self, override: Budget) -> Budget:
        """Fields set in ``override`` win."""
        return replace(self, **override.to_json())


_BUDGET_FIELDS = fields(Budget)


@dataclass(frozen=True)
class HttpConfig:
    method: str = ""
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    query: tuple[str, ...] = ()
    timeout_ms: int = 0

    def to_json(self) -> JSON:
        return {"method": self.method, "url": self.url, "headers": dict(self.headers),
                "query": list(self.query), "timeout_ms": self.timeout_ms}

    @classmethod
    def from_json(cls, d: JSON | None) -> HttpConfig:
        d = d or {}
        return cls(method=d.get("method") or "", url=d.get("url") or "",
                   headers=dict(d.get("headers") or {}), query=tuple(d.get("query") or ()),
                   timeout_ms=int(d.get("timeout_ms") or 0))


@dataclass(frozen=True)
class McpServer:
    """An MCP server an agent takes tools from (``AgentDef.mcp_servers``, docs/mcp.md)."""

    name: str
    # streamable HTTP; empty = ``name`` is looked up in the operator's --mcp-config
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    # the server's own tool names to offer; empty = all
    tools: tuple[str, ...] = ()
    timeout_ms: int = 0
    on_crash: OnCrash = OnCrash.RERUN

    def to_json(self) -> JSON:
        d: JSON = {"name": self.name, "url": self.url, "headers": dict(self.headers),
                   "tools": list(self.tools), "timeout_ms": self.timeout_ms}
        if self.on_crash is not OnCrash.RERUN:
            d["on_crash"] = str(self.on_crash)
        return d

    @classmethod
    def from_json(cls, d: JSON) -> McpServer:
        return cls(name=str(d.get("name") or ""), url=str(d.get("url") or ""),
                   headers=dict(d.get("headers") or {}), tools=tuple(d.get("tools") or ()),
                   timeout_ms=int(d.get("timeout_ms") or 0), on_crash=OnCrash(d.get("on_crash") or "rerun"))


@dataclass(frozen=True)
class McpTarget:
    """Where a tool of source ``mcp`` is called: the server as the agent named it and the tool's
    own name there (the offered name is ``<server>__<tool>``, changed to fit)."""

    server: McpServer
    tool: str

    def to_json(self) -> JSON:
        return {"server": self.server.to_json(), "tool": self.tool}

    @classmethod
    def from_json(cls, d: JSON) -> McpTarget:
        return cls(server=McpServer.from_json(d.get("server") or {}), tool=str(d.get("tool") or ""))


@dataclass(frozen=True)
class ToolDef:
    name: str
    description: str = ""
    input_schema: JSON = field(default_factory=dict)
    source: ToolSource = ToolSource.NATIVE
    http: HttpConfig | None = None
    # total time one call may take, dispatch to result; 0 = the daemon's --tool-deadline-ms
    deadline_ms: int = 0
    # its suspensions get Request.answer_url (docs/protocol.md §10)
    answer_link: bool = False
    # a call in flight at a crash or a lost worker: sent again (rerun) or asked about (ask)
    on_crash: OnCrash = OnCrash.RERUN
    # source mcp: the server and tool it was listed from
    mcp: McpTarget | None = None

    def to_json(self) -> JSON:
        d: JSON = {"name": self.name, "description": self.description,
                   "input_schema": self.input_schema, "source": str(self.source)}
        if self.http is not None:
            d["http"] = self.http.to_json()
        if self.mcp is not None:
            d["mcp"] = self.mcp.to_json()
        if self.deadline_ms:
            d["deadline_ms"] = self.deadline_ms
        if self.answer_link:
            d["answer_link"] = True
        if self.on_crash is not OnCrash.RERUN:
            d["on_crash"] = str(self.on_crash)
        return d

    @classmethod
    def from_json(cls, d: JSON) -> ToolDef:
        return cls(name=d["name"], description=d.get("description") or "",
                   input_schema=d.get("input_schema") or {}, source=ToolSource(d.get("source") or "native"),
                   http=HttpConfig.from_json(d["http"]) if d.get("http") else None,
                   deadline_ms=int(d.get("deadline_ms") or 0), answer_link=bool(d.get("answer_link")),
                   on_crash=OnCrash(d.get("on_crash") or "rerun"),
                   mcp=McpTarget.from_json(d["mcp"]) if d.get("mcp") else None)


@dataclass(frozen=True)
class AgentDef:
    name: str
    does: str = ""
    model: str = "inherit"
    soul: str = ""
    tools: tuple[ToolDef, ...] = ()
    team: tuple[str, ...] = ()
    budget: Budget = field(default_factory=Budget)
    wait_for: bool = False
    # extra model-request body parameters, merged over LlmConfig.request_params
    request_params: JSON = field(default_factory=dict)
    # suspensions of this agent (and its tools) get Request.answer_url (docs/protocol.md §10)
    answer_link: bool = False
    # MCP servers whose listed tools are in ``tools`` as source ``mcp`` (docs/mcp.md)
    mcp_servers: tuple[McpServer, ...] = ()

    def to_json(self) -> JSON:
        d: JSON = {"name": self.name, "does": self.does, "model": self.model, "soul": self.soul,
                   "tools": [t.to_json() for t in self.tools], "team": list(self.team),
                   "budget": self.budget.to_json(), "wait_for": self.wait_for,
                   "request_params": dict(self.request_params)}
        if self.answer_link:
            d["answer_link"] = True
        if self.mcp_servers:
            d["mcp_servers"] = [s.to_json() for s in self.mcp_servers]
        return d

    @classmethod
    def from_json(cls, d: JSON) -> AgentDef:
        return cls(name=d["name"], does=d.get("does") or "", model=d.get("model") or "inherit",
                   soul=d.get("soul") or "", tools=tuple(ToolDef.from_json(t) for t in d.get("tools") or ()),
                   team=tuple(d.get("team") or ()), budget=Budget.from_json(d.get("budget")),
                   wait_for=bool(d.get("wait_for")), request_params=dict(d.get("request_params") or {}),
                   answer_link=bool(d.get("answer_link")),
                   mcp_servers=tuple(McpServer.from_json(s) for s in d.get("mcp_servers") or ()))


@dataclass(frozen=True)
class LlmConfig:
    style: LlmStyle = LlmStyle.OPENAI
    base_url: str = ""
    model: str = ""
    api_key_env: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    retries: int = 3
    timeout_ms: int = 60_000
    # consume server-sent events and publish live ``text`` deltas
    stream: bool = False
    # merged last into every request body (never messages/tools/stream)
    request_params: JSON = field(default_factory=dict)
    # style anthropic: max_tokens per request; 0 = the transport's default (4096)
    max_tokens: int = 0

    def to_json(self) -> JSON:
        d = asdict(self)
        d["style"] = str(self.style)
        return d

    @classmethod
    def from_json(cls, d: JSON | None) -> LlmConfig:
        d = d or {}
        return cls(style=LlmStyle(d.get("style") or "openai"), base_url=d.get("base_url") or "",
                   model=d.get("model") or "", api_key_env=d.get("api_key_env") or "",
                   headers=dict(d.get("headers") or {}), retries=int(d.get("retries", 3)),
                   timeout_ms=int(d.get("timeout_ms") or 60_000), stream=bool(d.get("stream")),
                   request_params=dict(d.get("request_params") or {}),
                   max_tokens=int(d.get("max_tokens") or 0))


@dataclass(frozen=True)
class RuntimeOptions:
    """Runtime-wide settings, defaults from docs/protocol.md §2."""

    max_concurrent_turns: int = 8
    inbox_cap: int = 8
    close_grace_ms: int = 200
    tool_timeout_ms: int = 30_000
    wait_for: bool = False
    event_retention: int = 0
    max_turns: int = 6
    # gives a suspension without an expires_at one this far ahead (docs/protocol.md §10); 0 = none
    pending_ttl_ms: int = 0
    # every suspension of the runtime gets Request.answer_url (docs/protocol.md §10)
    answer_link: bool = False
    # which registry version an idle handle's next wake runs: "pinned" (its own) or "latest"
    version_policy: str = "pinned"
    # an unused, not-latest registry version is deleted this long after it was last used (one day)
    version_grace_ms: int = 86_400_000

    def to_json(self) -> JSON:
        return asdict(self)

    @classmethod
    def from_json(cls, d: JSON | None) -> RuntimeOptions:
        d = d or {}
        base = cls()
        return cls(**{f.name: d.get(f.name) or getattr(base, f.name) for f in fields(cls)})


@dataclass(frozen=True)
class InboxItem:
    from_: str
    channel: str
    text: str

    def to_json(self) -> JSON:
        return {"from": self.from_, "channel": self.channel, "text": self.text}

    @classmethod
    def from_json(cls, d: JSON) -> InboxItem:
        return cls(from_=d.get("from") or "", channel=d.get("channel") or "", text=d.get("text") or "")


@dataclass(frozen=True)
class Event:
    """One entry of a runtime's event log; ``seq`` is 0 only for live-only ``text``."""

    seq: int
    runtime_id: str
    handle: str
    type: EventType
    note: str = ""
    at: str = ""
    from_state: str = ""
    to_state: str = ""
    pending: Request | None = None
    result: TaskResult | None = None
    data: JSON | None = None

    def to_json(self) -> JSON:
        d: JSON = {"seq": self.seq, "runtime_id": self.runtime_id, "handle": self.handle,
                   "type": str(self.type), "note": self.note, "at": self.at}
        if self.from_state:
            d["from_state"], d["to_state"] = self.from_state, self.to_state
        if self.pending is not None:
            d["pending"] = self.pending.to_json()
        if self.result is not None:
            d["result"] = self.result.to_json()
        if self.data:
            d["data"] = self.data
        return d

    @classmethod
    def from_json(cls, d: JSON) -> Event:
        return cls(seq=int(d["seq"]), runtime_id=d["runtime_id"], handle=d.get("handle") or "",
                   type=EventType(d["type"]), note=d.get("note") or "", at=d.get("at") or "",
                   from_state=d.get("from_state") or "", to_state=d.get("to_state") or "",
                   pending=Request.from_json(d["pending"]) if d.get("pending") else None,
                   result=TaskResult.from_json(d["result"]) if d.get("result") else None,
                   data=d.get("data") or None)
