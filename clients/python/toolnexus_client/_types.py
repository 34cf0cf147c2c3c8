"""The plain Python values the client hands to and receives from its user.

Frozen dataclasses, no protobuf: ``_convert`` is the only module that turns
them into messages and back, so application code (and tool callables) never
touch generated classes. The pinned vocabularies of docs/protocol.md §2 are StrEnums;
fields stay ``str`` so a value the daemon adds later still round-trips.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

JSON = dict[str, Any]


class HandleState(StrEnum):
    """The state of a handle (docs/protocol.md §2)."""

    IDLE = "idle"
    RUNNING = "running"
    SUSPENDED = "suspended"
    CLOSED = "closed"


class Status(StrEnum):
    """The status of a TaskResult; only ``done`` and ``pending`` are not errors."""

    DONE = "done"
    PENDING = "pending"
    INCOMPLETE = "incomplete"
    INTERRUPTED = "interrupted"
    CLOSED = "closed"
    TIMEOUT = "timeout"
    ERROR = "error"


@dataclass(frozen=True)
class Request:
    """An out-of-band question a suspended tool waits on; ``kind`` is open (approval, input, ...)."""

    id: str
    kind: str
    prompt: str
    url: str | None = None
    data: JSON | None = None
    expires_at: str | None = None
    # set by the daemon when a link was asked for (answer_link): a single-use URL answering exactly
    # this request; announced live, never stored (docs/protocol.md §10)
    answer_url: str | None = None

    @classmethod
    def of(cls, value: Request | Mapping[str, Any]) -> Request:
        """A Request from itself or a dict (``expiresAt`` accepted as the JSON spelling)."""
        if isinstance(value, Request):
            return value
        expires = value.get("expires_at", value.get("expiresAt"))
        return cls(id=str(value.get("id") or ""), kind=str(value.get("kind") or ""),
                   prompt=str(value.get("prompt") or ""), url=value.get("url") or None,
                   data=dict(value["data"]) if value.get("data") else None,
                   expires_at=str(expires) if expires else None)


@dataclass(frozen=True)
class Answer:
    """The answer to a Request, routed by ``id``; ``reason`` is advisory (declined, cancelled, expired)."""

    id: str
    ok: bool
    data: JSON | None = None
    reason: str | None = None

    @classmethod
    def of(cls, value: Answer | Mapping[str, Any]) -> Answer:
        """An Answer from itself or a dict ``{"id", "ok", "data"?, "reason"?}``."""
        if isinstance(value, Answer):
            return value
        if "id" not in value or "ok" not in value:
            raise ValueError(f"an answer needs 'id' and 'ok', got keys {sorted(value)}")
        return cls(id=str(value["id"]), ok=bool(value["ok"]),
                   data=dict(value["data"]) if value.get("data") else None,
                   reason=str(value["reason"]) if value.get("reason") else None)


@dataclass(frozen=True)
class ToolResult:
    """What a tool returns: output text, or an error, or a suspension (``pending``)."""

    output: str = ""
    is_error: bool = False
    metadata: JSON | None = None
    pending: Request | None = None

    @classmethod
    def ok(cls, text: str, metadata: JSON | None = None) -> ToolResult:
        return cls(output=text, metadata=metadata)

    @classmethod
    def error(cls, text: str, metadata: JSON | None = None) -> ToolResult:
        return cls(output=text, is_error=True, metadata=metadata)

    @classmethod
    def suspend(cls, request: Request | Mapping[str, Any] | None = None, *, id: str = "", kind: str = "",
                prompt: str = "", url: str | None = None, data: JSON | None = None,
                expires_at: str | None = None) -> ToolResult:
        """Suspend the handle on a Request; without an id the daemon assigns a unique one."""
        if request is None:
            request = Request(id=id, kind=kind, prompt=prompt, url=url, data=data, expires_at=expires_at)
        return cls(pending=Request.of(request))


@dataclass(frozen=True)
class Context:
    """What a native tool knows about its call; ``answer`` is set when a resume re-invokes it.

    ``action_id`` is the same for every invocation of one call and different for every other call:
    build request ids from it (``id=f"approve:{ctx.action_id}"``) so each action asks its own
    question; a request id is single-use within a runtime.

    ``traceparent`` is the W3C trace context of the call's ``execute_tool`` span when the daemon
    traces (``--otlp-endpoint``), else "": start the tool's own spans under it to join the
    agent's trace."""

    call_id: str
    handle: str
    runtime_id: str
    tool: str
    answer: Answer | None = None
    action_id: str = ""
    traceparent: str = ""


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0


@dataclass(frozen=True)
class TaskResult:
    """The settled result of a turn (or a ``timeout`` of a wait)."""

    status: str
    text: str = ""
    is_error: bool = False
    pending: Request | None = None
    turns: int = 0
    total_tokens: int = 0
    limit: str = ""
    # some tokens were estimated by the daemon: the model server reported no usage
    usage_estimated: bool = False


@dataclass(frozen=True)
class InboxItem:
    sender: str
    channel: str
    text: str


@dataclass(frozen=True)
class DefinitionChange:
    """What changed, since a handle suspended, in what its answer will be fed to: ``part`` "tool"
    (``change`` "removed" or "schema", with the ``added``/``removed``/``retyped`` properties),
    "soul" or "model" (``change`` "changed"). ``refuses_resume``: Resume refuses it unless called
    with ``accept_changed_definition=True``."""

    part: str
    name: str
    change: str
    summary: str
    refuses_resume: bool = False
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    retyped: tuple[str, ...] = ()


@dataclass(frozen=True)
class HandleSnapshot:
    """A read-only view of one handle; ``usage_total``/``turns_total`` include its subtree and only grow."""

    id: str
    agent: str
    state: str
    parent: str = ""
    children: tuple[str, ...] = ()
    last_result: TaskResult | None = None
    usage_total: int = 0
    turns_total: int = 0
    pending: Request | None = None
    inbox: tuple[InboxItem, ...] = ()
    task_key: str = ""
    usage: Usage = field(default_factory=Usage)
    depth: int = 0
    usage_estimated: bool = False
    definition_changed: tuple[DefinitionChange, ...] = ()
    # the registry version this handle runs
    version: int = 0


@dataclass(frozen=True)
class VersionUse:
    """One registry version of a runtime (``Runtime.versions``): its number, the sha256 of its
    registry, when a New made it, how many handles are pinned to it, and whether it is the latest."""

    number: int
    digest: str
    created_at: str
    handles: int
    latest: bool


@dataclass(frozen=True)
class Event:
    """One entry of a runtime's event log (``seq`` 0 on live-only ``text`` events)."""

    seq: int
    runtime_id: str
    handle: str
    type: str
    from_state: str = ""
    to_state: str = ""
    note: str = ""
    pending: Request | None = None
    result: TaskResult | None = None
    at: str = ""
    data: JSON | None = None


@dataclass(frozen=True)
class Woken:
    """What a fused call answered (``spawn(..., prompt=...)``, ``wake(..., wait=...)``): the handle,
    whether its wake was queued behind the parent's running children, and — when a wait was asked
    for — the settled result of the turn the wake started (or a ``timeout`` result). ``result`` is
    None without a wait, or when a daemon shutdown cut the wait short: the wake is durable either
    way, so call ``wait(handle)`` for the result then."""

    handle: str
    queued: bool = False
    result: TaskResult | None = None


@dataclass(frozen=True)
class ResumeResult:
    """What Resume answered: the top-most handle the cascade reached and its settled result."""

    handle: str
    result: TaskResult | None
    duplicate: bool = False


@dataclass(frozen=True)
class Info:
    version: str
    store_path: str
    store_size_bytes: int
    limits: dict[str, int]
    runtimes: int
    format_version: str
    # with a runtime: its latest registry version, and the versions whose native calls wait for a worker
    runtime_version: int = 0
    versions_without_worker: tuple[int, ...] = ()
    # where the daemon listens (gRPC), its effective configuration by flag name (secrets read
    # "<redacted>") and its metrics endpoint ("" when off): what the Node client's info() carries too
    listen: tuple[str, ...] = ()
    config: dict[str, str] = field(default_factory=dict)
    metrics_address: str = ""


@dataclass(frozen=True)
class PostResult:
    """What Post did: the item is ``position``-th (1-based) in the inbox, which holds ``inbox_cap``."""

    position: int
    inbox_cap: int


@dataclass(frozen=True)
class InterruptResult:
    """What Interrupt did: ``from_state`` ``running`` (turn aborted, ``inbox_restored`` items put back)
    or ``suspended`` (``cancelled_request`` is the id of the pending request that was cancelled)."""

    from_state: str
    cancelled_request: str = ""
    inbox_restored: int = 0
