"""The relay: everything the daemon serves through the app's ``Connect`` workers.

``hub`` routes tool, model and resolve calls to capable workers (take and
reply timeouts, re-send of what a lost worker held, answers only from the
worker holding a call); ``messages`` are the typed calls and replies. No
gRPC here: ``api/worker_channel`` is the wire adapter.
"""

from .hub import NoReply, NoWorker, WorkerHub, WorkerLost, WorkerSession
from .messages import (
    CallKind,
    Incoming,
    ModelCallOut,
    ModelReplyIn,
    Outgoing,
    ResolutionIn,
    ResolveOut,
    ToolCallOut,
    ToolOutcomeIn,
    refused,
)

__all__ = ["CallKind", "Incoming", "ModelCallOut", "ModelReplyIn", "NoReply", "NoWorker", "Outgoing",
           "ResolutionIn", "ResolveOut", "ToolCallOut", "ToolOutcomeIn", "WorkerHub", "WorkerLost",
           "WorkerSession", "refused"]
