"""The domain error tree. Each error names the gRPC status it maps to by a plain
string, so the engine never imports grpc; ``api.status`` does the translation."""

from __future__ import annotations


class DaemonError(Exception):
    """Base of every error a client can act on."""

    code = "INTERNAL"


class InvalidArgument(DaemonError):
    code = "INVALID_ARGUMENT"


class NotFound(DaemonError):
    code = "NOT_FOUND"


class FailedPrecondition(DaemonError):
    code = "FAILED_PRECONDITION"


class DefinitionChanged(FailedPrecondition):
    """Resume refused: what the answer would be fed to changed since the request was asked (a
    tool's schema, a tool or an agent gone). Its text names the change; on the wire it is a
    plain FAILED_PRECONDITION (``DEFINITION_CHANGED_MARKS`` recognise the text there)."""


class AlreadyAnswered(FailedPrecondition):
    """Resume refused: the request was answered (or cancelled) already, with another answer."""


# the phrases only a DefinitionChanged text holds: how a daemon that forwarded an answer tells
# the owner's FAILED_PRECONDITION apart
DEFINITION_CHANGED_MARKS = ("accept_changed_definition", "which the current registry no longer defines",
                            "which registry version")


def is_definition_changed(text: str) -> bool:
    return any(mark in text for mark in DEFINITION_CHANGED_MARKS)


class ResourceExhausted(DaemonError):
    code = "RESOURCE_EXHAUSTED"


class OutOfRange(DaemonError):
    code = "OUT_OF_RANGE"


class Unavailable(DaemonError):
    code = "UNAVAILABLE"


class Unimplemented(DaemonError):
    code = "UNIMPLEMENTED"


class StoreError(DaemonError):
    """The store could not do what was asked; the message names the key or the cause."""

    code = "INTERNAL"


class StoreFull(StoreError, ResourceExhausted):
    """The LMDB map or the disk is full; nothing of the failed write was kept."""

    code = "RESOURCE_EXHAUSTED"


class StoreUnavailable(StoreError, Unavailable):
    """The database behind the store cannot be reached; nothing of the failed write was kept
    (or it was, if the connection broke at COMMIT: the caller retries, as after any UNAVAILABLE)."""

    code = "UNAVAILABLE"


class StoreLocked(StoreError):
    """Another daemon holds the data directory."""


class NodeTaken(StoreError):
    """Another live daemon process (renewing its node row) runs under this daemon's node id."""


class LeaseLost(StoreError):
    """A commit fenced by a runtime lease this daemon no longer holds: another daemon owns the
    runtime now. Nothing of the commit was kept; the caller retries, and the retry reaches the
    runtime's new owner."""

    code = "UNAVAILABLE"


class FormatTooNew(StoreError):
    """A record was written by a newer format version than this daemon reads."""


class PermissionDenied(DaemonError):
    code = "PERMISSION_DENIED"


class Unauthenticated(DaemonError):
    code = "UNAUTHENTICATED"


class DataLoss(DaemonError):
    """Stored data could not be read (a damaged record); the message names its key."""

    code = "DATA_LOSS"
