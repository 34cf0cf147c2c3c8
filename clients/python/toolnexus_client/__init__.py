"""toolnexus_client: the Python client of toolnexus-daemon.

Declare agents and their tools, create a runtime on the daemon, and drive it
with blocking calls; the client serves your native tools (and, with
``transport=``, your model) over the daemon's ``Connect`` stream in a
background thread. Against the daemon of ``make run`` and the scripted model of
``make dev-model`` (clients/python/README.md runs the same program)::

    from toolnexus_client import Runtime, Tool, ToolResult, agent, registry

    def secret_action(args, ctx):
        if ctx.answer is None:  # ctx.action_id: the same for every invocation of this call
            return ToolResult.suspend(id=f"secret-action:{ctx.action_id}", kind="authorization",
                                      prompt="approve?")
        return "action performed"

    tool = Tool("secret_action", execute=secret_action)
    reg = registry(agent("operator", does="acts after approval", uses={"tools": [tool]}))
    llm = {"style": "openai", "base_url": "http://127.0.0.1:8099/v1", "model": "dev"}
    rt = Runtime.new(target="127.0.0.1:50051", registry=reg, llm=llm)
    woken = rt.spawn(rt.root, "operator", prompt="please perform the secret action", wait=60)
    h, result = woken.handle, woken.result  # "root/operator.1"; status "pending", kind "authorization"
    rt.resume({"id": result.pending.id, "ok": True})
    rt.snapshot(h).last_result.text         # "action performed"

``toolnexus_client.aio`` has the same calls as coroutines.

``Daemon`` lists and watches the open suspensions across runtimes (``list_pending``,
``watch_pending``, ``list_runtimes``; docs/protocol.md §10).

See clients/python/README.md for the full API and its conventions.
"""

from ._daemon_calls import Created
from ._defs import AgentSpec, Budget, Execute, HttpSpec, Llm, McpServer, Registry, Tool, agent, registry
from ._dispatch import Resolver, Transport
from ._pending import PendingChange, PendingChangeType, PendingItem, PendingPage, RuntimePage, RuntimeSummary
from ._pending_watch import PendingStream
from ._types import (
    Answer,
    Context,
    DefinitionChange,
    Event,
    HandleSnapshot,
    HandleState,
    InboxItem,
    Info,
    InterruptResult,
    PostResult,
    Request,
    ResumeResult,
    Status,
    TaskResult,
    ToolResult,
    Usage,
    VersionUse,
    Woken,
)
from ._watch import EventStream
from .daemon import Daemon
from .errors import (
    Aborted,
    AlreadyExists,
    Cancelled,
    DataLoss,
    DeadlineExceeded,
    FailedPrecondition,
    Internal,
    InvalidArgument,
    NotFound,
    OutOfRange,
    PermissionDenied,
    ResourceExhausted,
    ToolnexusError,
    Unauthenticated,
    Unavailable,
    Unimplemented,
)
from .runtime import Runtime

__version__ = "0.1.0"

__all__ = [
    "Aborted", "AgentSpec", "AlreadyExists", "Answer", "Budget", "Cancelled", "Context", "Created", "Daemon",
    "DataLoss",
    "DeadlineExceeded", "DefinitionChange", "Event", "EventStream", "Execute", "FailedPrecondition",
    "HandleSnapshot",
    "HandleState", "HttpSpec", "InboxItem", "Info", "Internal", "InterruptResult", "InvalidArgument", "Llm",
    "McpServer",
    "NotFound", "OutOfRange", "PendingChange", "PendingChangeType", "PendingItem", "PendingPage",
    "PendingStream", "PermissionDenied", "PostResult", "Registry", "Request", "Resolver",
    "ResourceExhausted", "ResumeResult", "Runtime", "RuntimePage", "RuntimeSummary", "Status", "TaskResult",
    "Tool", "ToolResult", "ToolnexusError", "Transport", "Unauthenticated",
    "Unavailable", "Unimplemented", "Usage", "VersionUse", "Woken", "agent", "registry",
]
