"""An answer that came in through a link on a daemon that does not own its runtime, sent on to
the owner as a ``Resume`` (docs/protocol.md §10).

The link holds no runtime key, so the daemon vouches with the link itself: the owner's ``Resume``
accepts ``x-toolnexus-answer-link`` in place of the key when the token was minted for exactly
that runtime, request and handle (``api.keys.open_for_answer``). The call carries this daemon's
bearer token (the daemons of a cluster share one) and ``x-toolnexus-forwarded-by``, so an owner
that lost the runtime meanwhile answers UNAVAILABLE rather than forwarding again.
"""

from __future__ import annotations

import grpc
from grpc import aio

from ..engine.commit.ownership import Moved
from ..engine.state.answer_links import LinkRow
from ..errors import (
    AlreadyAnswered,
    DaemonError,
    DefinitionChanged,
    FailedPrecondition,
    NotFound,
    Unavailable,
    is_definition_changed,
)
from ..model import Answer
from . import convert
from ._gen import runtime_pb2 as pb
from .forward import Forwarder
from .keys import ANSWER_LINK_HEADER

TIMEOUT_S = 15.0


class LinkForwarder:
    def __init__(self, forwarder: Forwarder, auth_token: str) -> None:
        self._forwarder = forwarder
        self._auth_token = auth_token

    async def __call__(self, moved: Moved, row: LinkRow, answer: Answer, token: str) -> tuple[str, bool]:
        """The owner's (top handle, duplicate) for ``answer``; its refusal as a domain error."""
        request = pb.ResumeRequest(runtime_id=row.runtime, handle=row.handle, no_wait=True,
                                   answer=convert.answer_to(answer))
        metadata = [(ANSWER_LINK_HEADER, token)]
        if self._auth_token:
            metadata.append(("authorization", f"Bearer {self._auth_token}"))
        try:
            reply = await self._forwarder.send("Resume", request, moved, metadata, TIMEOUT_S)
        except aio.AioRpcError as err:
            raise _refusal(err) from err
        assert isinstance(reply, pb.ResumeResponse)
        return reply.handle, reply.duplicate


def _refusal(err: aio.AioRpcError) -> DaemonError:
    details = err.details() or ""
    if err.code() is grpc.StatusCode.FAILED_PRECONDITION:
        if is_definition_changed(details):
            return DefinitionChanged(details)
        return AlreadyAnswered(details) if "was already" in details else FailedPrecondition(details)
    if err.code() is grpc.StatusCode.NOT_FOUND:
        return NotFound(details)
    return Unavailable(f"the daemon that serves this request could not take the answer ({err.code().name}); "
                       "open the link again in a moment")
