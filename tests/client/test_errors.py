"""gRPC failures become typed ToolnexusError values (``errors``)."""

from __future__ import annotations

import grpc

from toolnexus_client import FailedPrecondition, NotFound, ToolnexusError
from toolnexus_client.errors import error_for, from_rpc_error


class _RpcError(grpc.RpcError):
    """What a failed sync call raises: an RpcError that is also a Call with code() and details()."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        self._code, self._details = code, details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details


def test_status_codes_map_to_subclasses() -> None:
    """NOT_FOUND → NotFound with the daemon's message, unchanged."""
    err = from_rpc_error(_RpcError(grpc.StatusCode.NOT_FOUND, 'unknown agent "x" (known: a, b)'))
    assert isinstance(err, NotFound)
    assert (err.code, err.message, err.status) == ("NOT_FOUND", 'unknown agent "x" (known: a, b)',
                                                   grpc.StatusCode.NOT_FOUND)
    assert isinstance(from_rpc_error(_RpcError(grpc.StatusCode.FAILED_PRECONDITION, "x")), FailedPrecondition)


def test_unmapped_code_is_the_base_class() -> None:
    """A code without a subclass still carries its name."""
    err = error_for("SOMETHING_NEW", "m")
    assert type(err) is ToolnexusError and str(err) == "SOMETHING_NEW: m"
