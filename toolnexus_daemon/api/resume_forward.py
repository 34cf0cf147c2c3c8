"""An answer that arrived on a daemon that does not own its runtime — through an answer link or
the web inspector — sent on to the owner as a ``Resume`` (docs/protocol.md §10, docs/inspector.md).

Both carry this daemon's bearer token (the daemons of a cluster share one) and
``x-toolnexus-forwarded-by`` (``Forwarder.send``), so an owner that lost the runtime meanwhile
answers UNAVAILABLE rather than forwarding again. What vouches for the person differs: a link
holds no runtime key, so the link itself goes along (the owner's ``Resume`` accepts
``x-toolnexus-answer-link`` in place of the key when the token was minted for exactly that
runtime, request and handle: ``api.keys.open_for_answer``); the inspector sends the runtime key
the person's session holds, which the owner checks as for any caller.
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
from .keys import ANSWER_LINK_HEADER, RUNTIME_KEY_HEADER

TIMEOUT_S = 15.0


class ResumeForwarder:
    """One owner-bound ``Resume`` with this daemon's token; the owner's refusal as a domain error."""

    def __init__(self, forwarder: Forwarder, auth_token: str, retry_hint: str) -> None:
        self._forwarder = forwarder
        self._auth_token = auth_token
        self._retry_hint = retry_hint

    async def resume(self, moved: Moved, runtime_id: str, handle: str, answer: Answer,
                     credential: list[tuple[str, str]]) -> tuple[str, bool]:
        """The owner's (top handle, duplicate) for ``answer``."""
        request = pb.ResumeRequest(runtime_id=runtime_id, handle=handle, no_wait=True,
                                   answer=convert.answer_to(answer))
        metadata = list(credential)
        if self._auth_token:
            metadata.append(("authorization", f"Bearer {self._auth_token}"))
        try:
            reply = await self._forwarder.send("Resume", request, moved, metadata, TIMEOUT_S,
                                               pb.ResumeResponse)
        except aio.AioRpcError as err:
            raise refusal(err, self._retry_hint) from err
        return reply.handle, reply.duplicate


class LinkForwarder:
    """An answer link's answer, vouched for by the link itself."""

    def __init__(self, forwarder: Forwarder, auth_token: str) -> None:
        self._resume = ResumeForwarder(forwarder, auth_token, "open the link again in a moment")

    async def __call__(self, moved: Moved, row: LinkRow, answer: Answer, token: str) -> tuple[str, bool]:
        link = [(ANSWER_LINK_HEADER, token)]
        return await self._resume.resume(moved, row.runtime, row.handle, answer, link)


class UiForwarder:
    """The inspector's answer, vouched for by the runtime key of the person's session."""

    def __init__(self, forwarder: Forwarder, auth_token: str) -> None:
        self._resume = ResumeForwarder(forwarder, auth_token, "answer again in a moment")

    async def __call__(self, moved: Moved, runtime_id: str, handle: str, answer: Answer,
                       key: str) -> tuple[str, bool]:
        return await self._resume.resume(moved, runtime_id, handle, answer,
                                         [(RUNTIME_KEY_HEADER, key)] if key else [])


def refusal(err: aio.AioRpcError, retry_hint: str) -> DaemonError:
    """The owner's status as the domain error the page or link shows."""
    details = err.details() or ""
    if err.code() is grpc.StatusCode.FAILED_PRECONDITION:
        if is_definition_changed(details):
            return DefinitionChanged(details)
        return AlreadyAnswered(details) if "was already" in details else FailedPrecondition(details)
    if err.code() is grpc.StatusCode.NOT_FOUND:
        return NotFound(details)
    return Unavailable(f"the daemon that serves this request could not take the answer ({err.code().name}); "
                       f"{retry_hint}")
