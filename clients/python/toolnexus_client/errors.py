"""The client's exception tree: every gRPC failure becomes a typed ToolnexusError.

Translated once, at the edge (``from_rpc_error``), with ``raise ... from`` so
the original ``grpc.RpcError`` stays reachable as ``__cause__``. ``code`` is
the status code's name (``"NOT_FOUND"``), ``message`` the daemon's details,
unchanged, so callers can match on the pinned strings of docs/protocol.md §2.
"""

from __future__ import annotations

import grpc


class ToolnexusError(Exception):
    """A failed daemon call: ``code`` (a grpc.StatusCode name) and the daemon's ``message``."""

    code_name = "UNKNOWN"

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message

    @property
    def status(self) -> grpc.StatusCode:
        """The grpc.StatusCode this error carries."""
        return getattr(grpc.StatusCode, self.code, grpc.StatusCode.UNKNOWN)


class Cancelled(ToolnexusError):
    code_name = "CANCELLED"


class InvalidArgument(ToolnexusError):
    code_name = "INVALID_ARGUMENT"


class DeadlineExceeded(ToolnexusError):
    code_name = "DEADLINE_EXCEEDED"


class NotFound(ToolnexusError):
    code_name = "NOT_FOUND"


class AlreadyExists(ToolnexusError):
    code_name = "ALREADY_EXISTS"


class PermissionDenied(ToolnexusError):
    code_name = "PERMISSION_DENIED"


class ResourceExhausted(ToolnexusError):
    code_name = "RESOURCE_EXHAUSTED"


class FailedPrecondition(ToolnexusError):
    code_name = "FAILED_PRECONDITION"


class Aborted(ToolnexusError):
    code_name = "ABORTED"


class OutOfRange(ToolnexusError):
    code_name = "OUT_OF_RANGE"


class Unimplemented(ToolnexusError):
    code_name = "UNIMPLEMENTED"


class Internal(ToolnexusError):
    code_name = "INTERNAL"


class Unavailable(ToolnexusError):
    code_name = "UNAVAILABLE"


class DataLoss(ToolnexusError):
    code_name = "DATA_LOSS"


class Unauthenticated(ToolnexusError):
    code_name = "UNAUTHENTICATED"


_BY_CODE: dict[str, type[ToolnexusError]] = {
    cls.code_name: cls
    for cls in (Cancelled, InvalidArgument, DeadlineExceeded, NotFound, AlreadyExists, PermissionDenied,
                ResourceExhausted, FailedPrecondition, Aborted, OutOfRange, Unimplemented, Internal,
                Unavailable, DataLoss, Unauthenticated)
}


def error_for(code: str, message: str) -> ToolnexusError:
    """The ToolnexusError subclass for a status code name (the base class for one without its own)."""
    return _BY_CODE.get(code, ToolnexusError)(code, message)


def from_rpc_error(err: grpc.RpcError) -> ToolnexusError:
    """Translate a grpc.RpcError (which is also a grpc.Call on the client side)."""
    code_fn = getattr(err, "code", None)
    details_fn = getattr(err, "details", None)
    code = code_fn() if callable(code_fn) else None
    details = details_fn() if callable(details_fn) else None
    name = code.name if isinstance(code, grpc.StatusCode) else "UNKNOWN"
    return error_for(name, details or str(err))
