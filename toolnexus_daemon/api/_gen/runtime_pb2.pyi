from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Budget(_message.Message):
    __slots__ = ("max_turns", "max_tokens", "max_tool_calls", "max_wall_ms", "max_children", "max_concurrent", "max_depth")
    MAX_TURNS_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    MAX_TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    MAX_WALL_MS_FIELD_NUMBER: _ClassVar[int]
    MAX_CHILDREN_FIELD_NUMBER: _ClassVar[int]
    MAX_CONCURRENT_FIELD_NUMBER: _ClassVar[int]
    MAX_DEPTH_FIELD_NUMBER: _ClassVar[int]
    max_turns: int
    max_tokens: int
    max_tool_calls: int
    max_wall_ms: int
    max_children: int
    max_concurrent: int
    max_depth: int
    def __init__(self, max_turns: _Optional[int] = ..., max_tokens: _Optional[int] = ..., max_tool_calls: _Optional[int] = ..., max_wall_ms: _Optional[int] = ..., max_children: _Optional[int] = ..., max_concurrent: _Optional[int] = ..., max_depth: _Optional[int] = ...) -> None: ...

class HttpConfig(_message.Message):
    __slots__ = ("method", "url", "headers", "query", "timeout_ms")
    class HeadersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    METHOD_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    HEADERS_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    method: str
    url: str
    headers: _containers.ScalarMap[str, str]
    query: _containers.RepeatedScalarFieldContainer[str]
    timeout_ms: int
    def __init__(self, method: _Optional[str] = ..., url: _Optional[str] = ..., headers: _Optional[_Mapping[str, str]] = ..., query: _Optional[_Iterable[str]] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class ToolDef(_message.Message):
    __slots__ = ("name", "description", "input_schema", "source", "http", "deadline_ms", "answer_link", "on_crash")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    INPUT_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    HTTP_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_MS_FIELD_NUMBER: _ClassVar[int]
    ANSWER_LINK_FIELD_NUMBER: _ClassVar[int]
    ON_CRASH_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    input_schema: _struct_pb2.Struct
    source: str
    http: HttpConfig
    deadline_ms: int
    answer_link: bool
    on_crash: str
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., input_schema: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., source: _Optional[str] = ..., http: _Optional[_Union[HttpConfig, _Mapping]] = ..., deadline_ms: _Optional[int] = ..., answer_link: _Optional[bool] = ..., on_crash: _Optional[str] = ...) -> None: ...

class AgentDef(_message.Message):
    __slots__ = ("name", "does", "model", "soul", "tools", "team", "budget", "wait_for", "request_params", "answer_link", "mcp_servers")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DOES_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    SOUL_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    TEAM_FIELD_NUMBER: _ClassVar[int]
    BUDGET_FIELD_NUMBER: _ClassVar[int]
    WAIT_FOR_FIELD_NUMBER: _ClassVar[int]
    REQUEST_PARAMS_FIELD_NUMBER: _ClassVar[int]
    ANSWER_LINK_FIELD_NUMBER: _ClassVar[int]
    MCP_SERVERS_FIELD_NUMBER: _ClassVar[int]
    name: str
    does: str
    model: str
    soul: str
    tools: _containers.RepeatedCompositeFieldContainer[ToolDef]
    team: _containers.RepeatedScalarFieldContainer[str]
    budget: Budget
    wait_for: bool
    request_params: _struct_pb2.Struct
    answer_link: bool
    mcp_servers: _containers.RepeatedCompositeFieldContainer[McpServer]
    def __init__(self, name: _Optional[str] = ..., does: _Optional[str] = ..., model: _Optional[str] = ..., soul: _Optional[str] = ..., tools: _Optional[_Iterable[_Union[ToolDef, _Mapping]]] = ..., team: _Optional[_Iterable[str]] = ..., budget: _Optional[_Union[Budget, _Mapping]] = ..., wait_for: _Optional[bool] = ..., request_params: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., answer_link: _Optional[bool] = ..., mcp_servers: _Optional[_Iterable[_Union[McpServer, _Mapping]]] = ...) -> None: ...

class McpServer(_message.Message):
    __slots__ = ("name", "url", "headers", "tools", "timeout_ms", "on_crash")
    class HeadersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    HEADERS_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    ON_CRASH_FIELD_NUMBER: _ClassVar[int]
    name: str
    url: str
    headers: _containers.ScalarMap[str, str]
    tools: _containers.RepeatedScalarFieldContainer[str]
    timeout_ms: int
    on_crash: str
    def __init__(self, name: _Optional[str] = ..., url: _Optional[str] = ..., headers: _Optional[_Mapping[str, str]] = ..., tools: _Optional[_Iterable[str]] = ..., timeout_ms: _Optional[int] = ..., on_crash: _Optional[str] = ...) -> None: ...

class LlmConfig(_message.Message):
    __slots__ = ("style", "base_url", "model", "api_key_env", "headers", "retries", "timeout_ms", "stream", "request_params", "max_tokens")
    class HeadersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    STYLE_FIELD_NUMBER: _ClassVar[int]
    BASE_URL_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    API_KEY_ENV_FIELD_NUMBER: _ClassVar[int]
    HEADERS_FIELD_NUMBER: _ClassVar[int]
    RETRIES_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    REQUEST_PARAMS_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    style: str
    base_url: str
    model: str
    api_key_env: str
    headers: _containers.ScalarMap[str, str]
    retries: int
    timeout_ms: int
    stream: bool
    request_params: _struct_pb2.Struct
    max_tokens: int
    def __init__(self, style: _Optional[str] = ..., base_url: _Optional[str] = ..., model: _Optional[str] = ..., api_key_env: _Optional[str] = ..., headers: _Optional[_Mapping[str, str]] = ..., retries: _Optional[int] = ..., timeout_ms: _Optional[int] = ..., stream: _Optional[bool] = ..., request_params: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., max_tokens: _Optional[int] = ...) -> None: ...

class RuntimeOptions(_message.Message):
    __slots__ = ("max_concurrent_turns", "inbox_cap", "close_grace_ms", "tool_timeout_ms", "wait_for", "event_retention", "max_turns", "answer_link", "pending_ttl_ms", "version_policy", "version_grace_ms")
    MAX_CONCURRENT_TURNS_FIELD_NUMBER: _ClassVar[int]
    INBOX_CAP_FIELD_NUMBER: _ClassVar[int]
    CLOSE_GRACE_MS_FIELD_NUMBER: _ClassVar[int]
    TOOL_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    WAIT_FOR_FIELD_NUMBER: _ClassVar[int]
    EVENT_RETENTION_FIELD_NUMBER: _ClassVar[int]
    MAX_TURNS_FIELD_NUMBER: _ClassVar[int]
    ANSWER_LINK_FIELD_NUMBER: _ClassVar[int]
    PENDING_TTL_MS_FIELD_NUMBER: _ClassVar[int]
    VERSION_POLICY_FIELD_NUMBER: _ClassVar[int]
    VERSION_GRACE_MS_FIELD_NUMBER: _ClassVar[int]
    max_concurrent_turns: int
    inbox_cap: int
    close_grace_ms: int
    tool_timeout_ms: int
    wait_for: bool
    event_retention: int
    max_turns: int
    answer_link: bool
    pending_ttl_ms: int
    version_policy: str
    version_grace_ms: int
    def __init__(self, max_concurrent_turns: _Optional[int] = ..., inbox_cap: _Optional[int] = ..., close_grace_ms: _Optional[int] = ..., tool_timeout_ms: _Optional[int] = ..., wait_for: _Optional[bool] = ..., event_retention: _Optional[int] = ..., max_turns: _Optional[int] = ..., answer_link: _Optional[bool] = ..., pending_ttl_ms: _Optional[int] = ..., version_policy: _Optional[str] = ..., version_grace_ms: _Optional[int] = ...) -> None: ...

class Request(_message.Message):
    __slots__ = ("id", "kind", "prompt", "url", "data", "expires_at", "answer_url")
    ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    ANSWER_URL_FIELD_NUMBER: _ClassVar[int]
    id: str
    kind: str
    prompt: str
    url: str
    data: _struct_pb2.Struct
    expires_at: str
    answer_url: str
    def __init__(self, id: _Optional[str] = ..., kind: _Optional[str] = ..., prompt: _Optional[str] = ..., url: _Optional[str] = ..., data: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., expires_at: _Optional[str] = ..., answer_url: _Optional[str] = ...) -> None: ...

class Answer(_message.Message):
    __slots__ = ("id", "ok", "data", "reason")
    ID_FIELD_NUMBER: _ClassVar[int]
    OK_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    id: str
    ok: bool
    data: _struct_pb2.Struct
    reason: str
    def __init__(self, id: _Optional[str] = ..., ok: _Optional[bool] = ..., data: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., reason: _Optional[str] = ...) -> None: ...

class Usage(_message.Message):
    __slots__ = ("prompt_tokens", "completion_tokens", "total_tokens")
    PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    def __init__(self, prompt_tokens: _Optional[int] = ..., completion_tokens: _Optional[int] = ..., total_tokens: _Optional[int] = ...) -> None: ...

class TaskResult(_message.Message):
    __slots__ = ("status", "text", "is_error", "pending", "turns", "total_tokens", "limit", "usage_estimated")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    IS_ERROR_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    TURNS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    USAGE_ESTIMATED_FIELD_NUMBER: _ClassVar[int]
    status: str
    text: str
    is_error: bool
    pending: Request
    turns: int
    total_tokens: int
    limit: str
    usage_estimated: bool
    def __init__(self, status: _Optional[str] = ..., text: _Optional[str] = ..., is_error: _Optional[bool] = ..., pending: _Optional[_Union[Request, _Mapping]] = ..., turns: _Optional[int] = ..., total_tokens: _Optional[int] = ..., limit: _Optional[str] = ..., usage_estimated: _Optional[bool] = ...) -> None: ...

class InboxItem(_message.Message):
    __slots__ = ("channel", "text")
    FROM_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    channel: str
    text: str
    def __init__(self, channel: _Optional[str] = ..., text: _Optional[str] = ..., **kwargs) -> None: ...

class HandleSnapshot(_message.Message):
    __slots__ = ("id", "agent", "state", "parent", "children", "last_result", "usage_total", "turns_total", "pending", "inbox", "task_key", "usage", "depth", "usage_estimated", "definition_changed", "version")
    ID_FIELD_NUMBER: _ClassVar[int]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    PARENT_FIELD_NUMBER: _ClassVar[int]
    CHILDREN_FIELD_NUMBER: _ClassVar[int]
    LAST_RESULT_FIELD_NUMBER: _ClassVar[int]
    USAGE_TOTAL_FIELD_NUMBER: _ClassVar[int]
    TURNS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    INBOX_FIELD_NUMBER: _ClassVar[int]
    TASK_KEY_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    DEPTH_FIELD_NUMBER: _ClassVar[int]
    USAGE_ESTIMATED_FIELD_NUMBER: _ClassVar[int]
    DEFINITION_CHANGED_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    id: str
    agent: str
    state: str
    parent: str
    children: _containers.RepeatedScalarFieldContainer[str]
    last_result: TaskResult
    usage_total: int
    turns_total: int
    pending: Request
    inbox: _containers.RepeatedCompositeFieldContainer[InboxItem]
    task_key: str
    usage: Usage
    depth: int
    usage_estimated: bool
    definition_changed: _containers.RepeatedCompositeFieldContainer[DefinitionChange]
    version: int
    def __init__(self, id: _Optional[str] = ..., agent: _Optional[str] = ..., state: _Optional[str] = ..., parent: _Optional[str] = ..., children: _Optional[_Iterable[str]] = ..., last_result: _Optional[_Union[TaskResult, _Mapping]] = ..., usage_total: _Optional[int] = ..., turns_total: _Optional[int] = ..., pending: _Optional[_Union[Request, _Mapping]] = ..., inbox: _Optional[_Iterable[_Union[InboxItem, _Mapping]]] = ..., task_key: _Optional[str] = ..., usage: _Optional[_Union[Usage, _Mapping]] = ..., depth: _Optional[int] = ..., usage_estimated: _Optional[bool] = ..., definition_changed: _Optional[_Iterable[_Union[DefinitionChange, _Mapping]]] = ..., version: _Optional[int] = ...) -> None: ...

class RegistryVersion(_message.Message):
    __slots__ = ("number", "digest", "created_at")
    NUMBER_FIELD_NUMBER: _ClassVar[int]
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    number: int
    digest: str
    created_at: str
    def __init__(self, number: _Optional[int] = ..., digest: _Optional[str] = ..., created_at: _Optional[str] = ...) -> None: ...

class DefinitionChange(_message.Message):
    __slots__ = ("part", "name", "change", "added", "removed", "retyped", "refuses_resume", "summary")
    PART_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    CHANGE_FIELD_NUMBER: _ClassVar[int]
    ADDED_FIELD_NUMBER: _ClassVar[int]
    REMOVED_FIELD_NUMBER: _ClassVar[int]
    RETYPED_FIELD_NUMBER: _ClassVar[int]
    REFUSES_RESUME_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    part: str
    name: str
    change: str
    added: _containers.RepeatedScalarFieldContainer[str]
    removed: _containers.RepeatedScalarFieldContainer[str]
    retyped: _containers.RepeatedScalarFieldContainer[str]
    refuses_resume: bool
    summary: str
    def __init__(self, part: _Optional[str] = ..., name: _Optional[str] = ..., change: _Optional[str] = ..., added: _Optional[_Iterable[str]] = ..., removed: _Optional[_Iterable[str]] = ..., retyped: _Optional[_Iterable[str]] = ..., refuses_resume: _Optional[bool] = ..., summary: _Optional[str] = ...) -> None: ...

class NewRequest(_message.Message):
    __slots__ = ("runtime_id", "agents", "llm", "options", "runtime_key")
    RUNTIME_ID_FIELD_NUMBER: _ClassVar[int]
    AGENTS_FIELD_NUMBER: _ClassVar[int]
    LLM_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_KEY_FIELD_NUMBER: _ClassVar[int]
    runtime_id: str
    agents: _containers.RepeatedCompositeFieldContainer[AgentDef]
    llm: LlmConfig
    options: RuntimeOptions
    runtime_key: str
    def __init__(self, runtime_id: _Optional[str] = ..., agents: _Optional[_Iterable[_Union[AgentDef, _Mapping]]] = ..., llm: _Optional[_Union[LlmConfig, _Mapping]] = ..., options: _Optional[_Union[RuntimeOptions, _Mapping]] = ..., runtime_key: _Optional[str] = ...) -> None: ...

class NewResponse(_message.Message):
    __slots__ = ("runtime_id", "root", "reattached", "version")
    RUNTIME_ID_FIELD_NUMBER: _ClassVar[int]
    ROOT_FIELD_NUMBER: _ClassVar[int]
    REATTACHED_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    runtime_id: str
    root: str
    reattached: bool
    version: RegistryVersion
    def __init__(self, runtime_id: _Optional[str] = ..., root: _Optional[str] = ..., reattached: _Optional[bool] = ..., version: _Optional[_Union[RegistryVersion, _Mapping]] = ...) -> None: ...

class SpawnRequest(_message.Message):
    __slots__ = ("runtime_id", "parent", "agent", "budget", "prompt", "wait_ms")
    RUNTIME_ID_FIELD_NUMBER: _ClassVar[int]
    PARENT_FIELD_NUMBER: _ClassVar[int]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    BUDGET_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    runtime_id: str
    parent: str
    agent: str
    budget: Budget
    prompt: str
    wait_ms: int
    def __init__(self, runtime_id: _Optional[str] = ..., parent: _Optional[str] = ..., agent: _Optional[str] = ..., budget: _Optional[_Union[Budget, _Mapping]] = ..., prompt: _Optional[str] = ..., wait_ms: _Optional[int] = ...) -> None: ...

class SpawnResponse(_message.Message):
    __slots__ = ("handle", "queued", "result")
    HANDLE_FIELD_NUMBER: _ClassVar[int]
    QUEUED_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    handle: str
    queued: bool
    result: TaskResult
    def __init__(self, handle: _Optional[str] = ..., queued: _Optional[bool] = ..., result: _Optional[_Union[TaskResult, _Mapping]] = ...) -> None: ...

class WakeRequest(_message.Message):
    __slots__ = ("runtime_id", "handle", "prompt", "wait_ms", "upgrade")
    RUNTIME_ID_FIELD_NUMBER: _ClassVar[int]
    HANDLE_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    UPGRADE_FIELD_NUMBER: _ClassVar[int]
    runtime_id: str
    handle: str
    prompt: str
    wait_ms: int
    upgrade: bool
    def __init__(self, runtime_id: _Optional[str] = ..., handle: _Optional[str] = ..., prompt: _Optional[str] = ..., wait_ms: _Optional[int] = ..., upgrade: _Optional[bool] = ...) -> None: ...

class WakeResponse(_message.Message):
    __slots__ = ("queued", "result")
    QUEUED_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    queued: bool
    result: TaskResult
    def __init__(self, queued: _Optional[bool] = ..., result: _Optional[_Union[TaskResult, _Mapping]] = ...) -> None: ...

class WaitRequest(_message.Message):
    __slots__ = ("runtime_id", "handle", "timeout_ms")
    RUNTIME_ID_FIELD_NUMBER: _ClassVar[int]
    HANDLE_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    runtime_id: str
    handle: str
    timeout_ms: int
    def __init__(self, runtime_id: _Optional[str] = ..., handle: _Optional[str] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class ResumeRequest(_message.Message):
    __slots__ = ("runtime_id", "answer", "handle", "no_wait", "accept_changed_definition", "upgrade")
    RUNTIME_ID_FIELD_NUMBER: _ClassVar[int]
    ANSWER_FIELD_NUMBER: _ClassVar[int]
    HANDLE_FIELD_NUMBER: _ClassVar[int]
    NO_WAIT_FIELD_NUMBER: _ClassVar[int]
    ACCEPT_CHANGED_DEFINITION_FIELD_NUMBER: _ClassVar[int]
    UPGRADE_FIELD_NUMBER: _ClassVar[int]
    runtime_id: str
    answer: Answer
    handle: str
    no_wait: bool
    accept_changed_definition: bool
    upgrade: bool
    def __init__(self, runtime_id: _Optional[str] = ..., answer: _Optional[_Union[Answer, _Mapping]] = ..., handle: _Optional[str] = ..., no_wait: _Optional[bool] = ..., accept_changed_definition: _Optional[bool] = ..., upgrade: _Optional[bool] = ...) -> None: ...

class ResumeResponse(_message.Message):
    __slots__ = ("handle", "result", "duplicate")
    HANDLE_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    DUPLICATE_FIELD_NUMBER: _ClassVar[int]
    handle: str
    result: TaskResult
    duplicate: bool
    def __init__(self, handle: _Optional[str] = ..., result: _Optional[_Union[TaskResult, _Mapping]] = ..., duplicate: _Optional[bool] = ...) -> None: ...

class SnapshotRequest(_message.Message):
    __slots__ = ("runtime_id", "handle")
    RUNTIME_ID_FIELD_NUMBER: _ClassVar[int]
    HANDLE_FIELD_NUMBER: _ClassVar[int]
    runtime_id: str
    handle: str
    def __init__(self, runtime_id: _Optional[str] = ..., handle: _Optional[str] = ...) -> None: ...

class ShutdownRequest(_message.Message):
    __slots__ = ("runtime_id", "purge", "daemon")
    RUNTIME_ID_FIELD_NUMBER: _ClassVar[int]
    PURGE_FIELD_NUMBER: _ClassVar[int]
    DAEMON_FIELD_NUMBER: _ClassVar[int]
    runtime_id: str
    purge: bool
    daemon: bool
    def __init__(self, runtime_id: _Optional[str] = ..., purge: _Optional[bool] = ..., daemon: _Optional[bool] = ...) -> None: ...

class ShutdownResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class WatchRequest(_message.Message):
    __slots__ = ("runtime_id", "after_seq", "types", "handle")
    RUNTIME_ID_FIELD_NUMBER: _ClassVar[int]
    AFTER_SEQ_FIELD_NUMBER: _ClassVar[int]
    TYPES_FIELD_NUMBER: _ClassVar[int]
    HANDLE_FIELD_NUMBER: _ClassVar[int]
    runtime_id: str
    after_seq: int
    types: _containers.RepeatedScalarFieldContainer[str]
    handle: str
    def __init__(self, runtime_id: _Optional[str] = ..., after_seq: _Optional[int] = ..., types: _Optional[_Iterable[str]] = ..., handle: _Optional[str] = ...) -> None: ...

class Event(_message.Message):
    __slots__ = ("seq", "runtime_id", "handle", "type", "from_state", "to_state", "note", "pending", "result", "at", "data")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_ID_FIELD_NUMBER: _ClassVar[int]
    HANDLE_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    FROM_STATE_FIELD_NUMBER: _ClassVar[int]
    TO_STATE_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    AT_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    seq: int
    runtime_id: str
    handle: str
    type: str
    from_state: str
    to_state: str
    note: str
    pending: Request
    result: TaskResult
    at: str
    data: _struct_pb2.Struct
    def __init__(self, seq: _Optional[int] = ..., runtime_id: _Optional[str] = ..., handle: _Optional[str] = ..., type: _Optional[str] = ..., from_state: _Optional[str] = ..., to_state: _Optional[str] = ..., note: _Optional[str] = ..., pending: _Optional[_Union[Request, _Mapping]] = ..., result: _Optional[_Union[TaskResult, _Mapping]] = ..., at: _Optional[str] = ..., data: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class PostRequest(_message.Message):
    __slots__ = ("runtime_id", "handle", "item")
    RUNTIME_ID_FIELD_NUMBER: _ClassVar[int]
    HANDLE_FIELD_NUMBER: _ClassVar[int]
    ITEM_FIELD_NUMBER: _ClassVar[int]
    runtime_id: str
    handle: str
    item: InboxItem
    def __init__(self, runtime_id: _Optional[str] = ..., handle: _Optional[str] = ..., item: _Optional[_Union[InboxItem, _Mapping]] = ...) -> None: ...

class PostResponse(_message.Message):
    __slots__ = ("position", "inbox_cap")
    POSITION_FIELD_NUMBER: _ClassVar[int]
    INBOX_CAP_FIELD_NUMBER: _ClassVar[int]
    position: int
    inbox_cap: int
    def __init__(self, position: _Optional[int] = ..., inbox_cap: _Optional[int] = ...) -> None: ...

class InterruptRequest(_message.Message):
    __slots__ = ("runtime_id", "handle")
    RUNTIME_ID_FIELD_NUMBER: _ClassVar[int]
    HANDLE_FIELD_NUMBER: _ClassVar[int]
    runtime_id: str
    handle: str
    def __init__(self, runtime_id: _Optional[str] = ..., handle: _Optional[str] = ...) -> None: ...

class InterruptResponse(_message.Message):
    __slots__ = ("from_state", "cancelled_request", "inbox_restored")
    FROM_STATE_FIELD_NUMBER: _ClassVar[int]
    CANCELLED_REQUEST_FIELD_NUMBER: _ClassVar[int]
    INBOX_RESTORED_FIELD_NUMBER: _ClassVar[int]
    from_state: str
    cancelled_request: str
    inbox_restored: int
    def __init__(self, from_state: _Optional[str] = ..., cancelled_request: _Optional[str] = ..., inbox_restored: _Optional[int] = ...) -> None: ...

class CloseRequest(_message.Message):
    __slots__ = ("runtime_id", "handle")
    RUNTIME_ID_FIELD_NUMBER: _ClassVar[int]
    HANDLE_FIELD_NUMBER: _ClassVar[int]
    runtime_id: str
    handle: str
    def __init__(self, runtime_id: _Optional[str] = ..., handle: _Optional[str] = ...) -> None: ...

class CloseResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListRequest(_message.Message):
    __slots__ = ("runtime_id",)
    RUNTIME_ID_FIELD_NUMBER: _ClassVar[int]
    runtime_id: str
    def __init__(self, runtime_id: _Optional[str] = ...) -> None: ...

class ListResponse(_message.Message):
    __slots__ = ("handles",)
    HANDLES_FIELD_NUMBER: _ClassVar[int]
    handles: _containers.RepeatedCompositeFieldContainer[HandleSnapshot]
    def __init__(self, handles: _Optional[_Iterable[_Union[HandleSnapshot, _Mapping]]] = ...) -> None: ...

class InfoRequest(_message.Message):
    __slots__ = ("runtime_id",)
    RUNTIME_ID_FIELD_NUMBER: _ClassVar[int]
    runtime_id: str
    def __init__(self, runtime_id: _Optional[str] = ...) -> None: ...

class InfoResponse(_message.Message):
    __slots__ = ("version", "store_path", "store_size_bytes", "limits", "runtimes", "format_version", "listen", "config", "metrics_address", "node", "advertise", "cluster", "versions_without_worker", "runtime_version")
    class LimitsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    class ConfigEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    VERSION_FIELD_NUMBER: _ClassVar[int]
    STORE_PATH_FIELD_NUMBER: _ClassVar[int]
    STORE_SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    RUNTIMES_FIELD_NUMBER: _ClassVar[int]
    FORMAT_VERSION_FIELD_NUMBER: _ClassVar[int]
    LISTEN_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    METRICS_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    ADVERTISE_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    VERSIONS_WITHOUT_WORKER_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_VERSION_FIELD_NUMBER: _ClassVar[int]
    version: str
    store_path: str
    store_size_bytes: int
    limits: _containers.ScalarMap[str, int]
    runtimes: int
    format_version: str
    listen: _containers.RepeatedScalarFieldContainer[str]
    config: _containers.ScalarMap[str, str]
    metrics_address: str
    node: str
    advertise: str
    cluster: _containers.RepeatedCompositeFieldContainer[ClusterNode]
    versions_without_worker: _containers.RepeatedScalarFieldContainer[int]
    runtime_version: int
    def __init__(self, version: _Optional[str] = ..., store_path: _Optional[str] = ..., store_size_bytes: _Optional[int] = ..., limits: _Optional[_Mapping[str, int]] = ..., runtimes: _Optional[int] = ..., format_version: _Optional[str] = ..., listen: _Optional[_Iterable[str]] = ..., config: _Optional[_Mapping[str, str]] = ..., metrics_address: _Optional[str] = ..., node: _Optional[str] = ..., advertise: _Optional[str] = ..., cluster: _Optional[_Iterable[_Union[ClusterNode, _Mapping]]] = ..., versions_without_worker: _Optional[_Iterable[int]] = ..., runtime_version: _Optional[int] = ...) -> None: ...

class ListPendingRequest(_message.Message):
    __slots__ = ("runtime_id", "kind", "min_age_ms", "max_age_ms", "page_size", "page_token")
    RUNTIME_ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    MIN_AGE_MS_FIELD_NUMBER: _ClassVar[int]
    MAX_AGE_MS_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    runtime_id: str
    kind: str
    min_age_ms: int
    max_age_ms: int
    page_size: int
    page_token: str
    def __init__(self, runtime_id: _Optional[str] = ..., kind: _Optional[str] = ..., min_age_ms: _Optional[int] = ..., max_age_ms: _Optional[int] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class PendingItem(_message.Message):
    __slots__ = ("request", "runtime_id", "handle", "top_handle", "created_at", "expires_at", "agent", "version")
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_ID_FIELD_NUMBER: _ClassVar[int]
    HANDLE_FIELD_NUMBER: _ClassVar[int]
    TOP_HANDLE_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    request: Request
    runtime_id: str
    handle: str
    top_handle: str
    created_at: str
    expires_at: str
    agent: str
    version: int
    def __init__(self, request: _Optional[_Union[Request, _Mapping]] = ..., runtime_id: _Optional[str] = ..., handle: _Optional[str] = ..., top_handle: _Optional[str] = ..., created_at: _Optional[str] = ..., expires_at: _Optional[str] = ..., agent: _Optional[str] = ..., version: _Optional[int] = ...) -> None: ...

class ListPendingResponse(_message.Message):
    __slots__ = ("items", "next_page_token")
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[PendingItem]
    next_page_token: str
    def __init__(self, items: _Optional[_Iterable[_Union[PendingItem, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ListRuntimesRequest(_message.Message):
    __slots__ = ("page_size", "page_token")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class RuntimeSummary(_message.Message):
    __slots__ = ("runtime_id", "created_at", "handles", "pending", "keyed", "version", "versions_without_worker")
    class HandlesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    RUNTIME_ID_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    HANDLES_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    KEYED_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    VERSIONS_WITHOUT_WORKER_FIELD_NUMBER: _ClassVar[int]
    runtime_id: str
    created_at: str
    handles: _containers.ScalarMap[str, int]
    pending: int
    keyed: bool
    version: int
    versions_without_worker: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, runtime_id: _Optional[str] = ..., created_at: _Optional[str] = ..., handles: _Optional[_Mapping[str, int]] = ..., pending: _Optional[int] = ..., keyed: _Optional[bool] = ..., version: _Optional[int] = ..., versions_without_worker: _Optional[_Iterable[int]] = ...) -> None: ...

class ListRuntimesResponse(_message.Message):
    __slots__ = ("runtimes", "next_page_token")
    RUNTIMES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    runtimes: _containers.RepeatedCompositeFieldContainer[RuntimeSummary]
    next_page_token: str
    def __init__(self, runtimes: _Optional[_Iterable[_Union[RuntimeSummary, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class WatchPendingRequest(_message.Message):
    __slots__ = ("runtime_id", "kind")
    RUNTIME_ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    runtime_id: str
    kind: str
    def __init__(self, runtime_id: _Optional[str] = ..., kind: _Optional[str] = ...) -> None: ...

class PendingChange(_message.Message):
    __slots__ = ("type", "item", "reason")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    ITEM_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    type: str
    item: PendingItem
    reason: str
    def __init__(self, type: _Optional[str] = ..., item: _Optional[_Union[PendingItem, _Mapping]] = ..., reason: _Optional[str] = ...) -> None: ...

class ClusterNode(_message.Message):
    __slots__ = ("node", "address", "runtimes")
    NODE_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    RUNTIMES_FIELD_NUMBER: _ClassVar[int]
    node: str
    address: str
    runtimes: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, node: _Optional[str] = ..., address: _Optional[str] = ..., runtimes: _Optional[_Iterable[str]] = ...) -> None: ...

class WorkerHello(_message.Message):
    __slots__ = ("runtime_id", "worker_id", "tools", "llm", "resolver", "no_tools", "versions")
    RUNTIME_ID_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    LLM_FIELD_NUMBER: _ClassVar[int]
    RESOLVER_FIELD_NUMBER: _ClassVar[int]
    NO_TOOLS_FIELD_NUMBER: _ClassVar[int]
    VERSIONS_FIELD_NUMBER: _ClassVar[int]
    runtime_id: str
    worker_id: str
    tools: _containers.RepeatedScalarFieldContainer[str]
    llm: bool
    resolver: bool
    no_tools: bool
    versions: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, runtime_id: _Optional[str] = ..., worker_id: _Optional[str] = ..., tools: _Optional[_Iterable[str]] = ..., llm: _Optional[bool] = ..., resolver: _Optional[bool] = ..., no_tools: _Optional[bool] = ..., versions: _Optional[_Iterable[int]] = ...) -> None: ...

class ListVersionsRequest(_message.Message):
    __slots__ = ("runtime_id",)
    RUNTIME_ID_FIELD_NUMBER: _ClassVar[int]
    runtime_id: str
    def __init__(self, runtime_id: _Optional[str] = ...) -> None: ...

class VersionUse(_message.Message):
    __slots__ = ("version", "handles", "latest")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    HANDLES_FIELD_NUMBER: _ClassVar[int]
    LATEST_FIELD_NUMBER: _ClassVar[int]
    version: RegistryVersion
    handles: int
    latest: bool
    def __init__(self, version: _Optional[_Union[RegistryVersion, _Mapping]] = ..., handles: _Optional[int] = ..., latest: _Optional[bool] = ...) -> None: ...

class ListVersionsResponse(_message.Message):
    __slots__ = ("versions",)
    VERSIONS_FIELD_NUMBER: _ClassVar[int]
    versions: _containers.RepeatedCompositeFieldContainer[VersionUse]
    def __init__(self, versions: _Optional[_Iterable[_Union[VersionUse, _Mapping]]] = ...) -> None: ...

class ToolOutcome(_message.Message):
    __slots__ = ("call_id", "output", "is_error", "metadata", "pending")
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    IS_ERROR_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    call_id: str
    output: str
    is_error: bool
    metadata: _struct_pb2.Struct
    pending: Request
    def __init__(self, call_id: _Optional[str] = ..., output: _Optional[str] = ..., is_error: _Optional[bool] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., pending: _Optional[_Union[Request, _Mapping]] = ...) -> None: ...

class LlmReply(_message.Message):
    __slots__ = ("call_id", "status", "body", "error")
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    call_id: str
    status: int
    body: _struct_pb2.Struct
    error: str
    def __init__(self, call_id: _Optional[str] = ..., status: _Optional[int] = ..., body: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., error: _Optional[str] = ...) -> None: ...

class ResolveReply(_message.Message):
    __slots__ = ("call_id", "answer")
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    ANSWER_FIELD_NUMBER: _ClassVar[int]
    call_id: str
    answer: Answer
    def __init__(self, call_id: _Optional[str] = ..., answer: _Optional[_Union[Answer, _Mapping]] = ...) -> None: ...

class WorkerMessage(_message.Message):
    __slots__ = ("hello", "tool_outcome", "llm_reply", "resolve_reply")
    HELLO_FIELD_NUMBER: _ClassVar[int]
    TOOL_OUTCOME_FIELD_NUMBER: _ClassVar[int]
    LLM_REPLY_FIELD_NUMBER: _ClassVar[int]
    RESOLVE_REPLY_FIELD_NUMBER: _ClassVar[int]
    hello: WorkerHello
    tool_outcome: ToolOutcome
    llm_reply: LlmReply
    resolve_reply: ResolveReply
    def __init__(self, hello: _Optional[_Union[WorkerHello, _Mapping]] = ..., tool_outcome: _Optional[_Union[ToolOutcome, _Mapping]] = ..., llm_reply: _Optional[_Union[LlmReply, _Mapping]] = ..., resolve_reply: _Optional[_Union[ResolveReply, _Mapping]] = ...) -> None: ...

class ToolCall(_message.Message):
    __slots__ = ("call_id", "handle", "tool", "arguments", "answer", "action_id")
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    HANDLE_FIELD_NUMBER: _ClassVar[int]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_FIELD_NUMBER: _ClassVar[int]
    ANSWER_FIELD_NUMBER: _ClassVar[int]
    ACTION_ID_FIELD_NUMBER: _ClassVar[int]
    call_id: str
    handle: str
    tool: str
    arguments: _struct_pb2.Struct
    answer: Answer
    action_id: str
    def __init__(self, call_id: _Optional[str] = ..., handle: _Optional[str] = ..., tool: _Optional[str] = ..., arguments: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., answer: _Optional[_Union[Answer, _Mapping]] = ..., action_id: _Optional[str] = ...) -> None: ...

class LlmCall(_message.Message):
    __slots__ = ("call_id", "handle", "body")
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    HANDLE_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    call_id: str
    handle: str
    body: _struct_pb2.Struct
    def __init__(self, call_id: _Optional[str] = ..., handle: _Optional[str] = ..., body: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class Resolve(_message.Message):
    __slots__ = ("call_id", "handle", "request")
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    HANDLE_FIELD_NUMBER: _ClassVar[int]
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    call_id: str
    handle: str
    request: Request
    def __init__(self, call_id: _Optional[str] = ..., handle: _Optional[str] = ..., request: _Optional[_Union[Request, _Mapping]] = ...) -> None: ...

class Welcome(_message.Message):
    __slots__ = ("worker_id", "runtime_id")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_ID_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    runtime_id: str
    def __init__(self, worker_id: _Optional[str] = ..., runtime_id: _Optional[str] = ...) -> None: ...

class DaemonMessage(_message.Message):
    __slots__ = ("tool_call", "llm_call", "resolve", "welcome")
    TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    LLM_CALL_FIELD_NUMBER: _ClassVar[int]
    RESOLVE_FIELD_NUMBER: _ClassVar[int]
    WELCOME_FIELD_NUMBER: _ClassVar[int]
    tool_call: ToolCall
    llm_call: LlmCall
    resolve: Resolve
    welcome: Welcome
    def __init__(self, tool_call: _Optional[_Union[ToolCall, _Mapping]] = ..., llm_call: _Optional[_Union[LlmCall, _Mapping]] = ..., resolve: _Optional[_Union[Resolve, _Mapping]] = ..., welcome: _Optional[_Union[Welcome, _Mapping]] = ...) -> None: ...
