"""Domain errors -> gRPC status, translated once at the edge.

Every ``DaemonError`` names its status code as a string (``errors.py`` never
imports grpc); the decorators here wrap each servicer method so a domain
error aborts the RPC with that code and its message, and anything else is a
bug: logged with its traceback and reported as INTERNAL with a generic
message (an exception's text may carry data that must not leave the daemon).
A request the guarded deserializer refused (``decode.Refused``) never reaches
the method: it is INVALID_ARGUMENT here. Every call ends with one access-log
line (``access.log_call``).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import NoReturn, TypeVar

import grpc
from grpc import aio

from ..errors import DaemonError, InvalidArgument
from .access import log_call
from .decode import Refused
from .limits import check_ids

log = logging.getLogger("toolnexus_daemon.api")

Req = TypeVar("Req")  # what the method is given: the request, or (stream-in) their iterator
In = TypeVar("In")  # one request message (the context's first parameter)
Resp = TypeVar("Resp")
Self = TypeVar("Self")
# a servicer method's context, typed by the RPC it serves: Ctx[pb.NewRequest, pb.NewResponse]
Ctx = aio.ServicerContext
INTERNAL_MESSAGE = "internal error; the daemon log has the details"


def status_code(err: DaemonError) -> grpc.StatusCode:
    """The gRPC code a domain error names; INTERNAL for an unknown name."""
    try:
        return grpc.StatusCode[err.code]
    except KeyError:
        return grpc.StatusCode.INTERNAL


async def abort_with(context: Ctx[In, Resp], exc: Exception, method: str) -> NoReturn:
    """Abort the RPC for ``exc``: its own status if it is a domain error, else INTERNAL."""
    if isinstance(exc, DaemonError):
        await context.abort(status_code(exc), str(exc))
    log.error("RPC failed with an unexpected error", exc_info=exc, extra={"method": method})
    await context.abort(grpc.StatusCode.INTERNAL, INTERNAL_MESSAGE)
    raise AssertionError("unreachable: context.abort raises")


def unary(fn: Callable[[Self, Req, Ctx[In, Resp]], Awaitable[Resp]],
          ) -> Callable[[Self, Req, Ctx[In, Resp]], Awaitable[Resp]]:
    """Wrap a unary (or stream-in) servicer method with the error translation."""

    @functools.wraps(fn)
    async def wrapper(self: Self, request: Req, context: Ctx[In, Resp]) -> Resp:
        started = time.monotonic()
        try:
            _refuse_malformed(request)
            response = await fn(self, request, context)
        except aio.AbortError:
            raise
        except Exception as exc:
            log_call(fn.__name__, request, _code_name(exc), started, exc)
            await abort_with(context, exc, fn.__name__)
        log_call(fn.__name__, request, "OK", started)
        return response

    return wrapper


def streaming(fn: Callable[[Self, Req, Ctx[In, Resp]], AsyncGenerator[Resp, None]],
              ) -> Callable[[Self, Req, Ctx[In, Resp]], AsyncIterator[Resp]]:
    """Wrap a server-streaming servicer method (an async generator) with the error translation."""

    @functools.wraps(fn)
    async def wrapper(self: Self, request: Req,
                      context: Ctx[In, Resp]) -> AsyncIterator[Resp]:
        started = time.monotonic()
        try:
            _refuse_malformed(request)
            # aclosing: a cancelled stream must run the inner generator's cleanup now, not at GC
            async with contextlib.aclosing(fn(self, request, context)) as items:
                async for item in items:
                    yield item
        except aio.AbortError:
            raise
        except Exception as exc:
            log_call(fn.__name__, request, _code_name(exc), started, exc)
            await abort_with(context, exc, fn.__name__)
        log_call(fn.__name__, request, "OK", started)

    return wrapper


def _refuse_malformed(request: object) -> None:
    if isinstance(request, Refused):
        raise InvalidArgument(request.reason)
    check_ids(request)


def _code_name(exc: Exception) -> str:
    return status_code(exc).name if isinstance(exc, DaemonError) else "INTERNAL"
