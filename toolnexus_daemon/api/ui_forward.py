"""An answer given in the web inspector for a runtime another daemon of the cluster owns, sent on
to the owner as a ``Resume`` (docs/inspector.md).

The call carries this daemon's bearer token (the daemons of a cluster share one), the runtime key
the person's session holds (the owner checks it as for any caller) and
``x-toolnexus-forwarded-by`` (``Forwarder.send``), so an owner that lost the runtime meanwhile
answers UNAVAILABLE rather than forwarding again.
"""

from __future__ import annotations

from grpc import aio

from ..engine.commit.ownership import Moved
from ..model import Answer
from . import convert
from ._gen import runtime_pb2 as pb
from .forward import Forwarder
from .keys import RUNTIME_KEY_HEADER
from .link_forward import TIMEOUT_S, _refusal


class UiForwarder:
    def __init__(self, forwarder: Forwarder, auth_token: str) -> None:
        self._forwarder = forwarder
        self._auth_token = auth_token

    async def __call__(self, moved: Moved, runtime_id: str, handle: str, answer: Answer,
                       key: str) -> tuple[str, bool]:
        """The owner's (top handle, duplicate) for ``answer``; its refusal as a domain error."""
        request = pb.ResumeRequest(runtime_id=runtime_id, handle=handle, no_wait=True,
                                   answer=convert.answer_to(answer))
        metadata = [(RUNTIME_KEY_HEADER, key)] if key else []
        if self._auth_token:
            metadata.append(("authorization", f"Bearer {self._auth_token}"))
        try:
            reply = await self._forwarder.send("Resume", request, moved, metadata, TIMEOUT_S)
        except aio.AioRpcError as err:
            raise _refusal(err) from err
        assert isinstance(reply, pb.ResumeResponse)
        return reply.handle, reply.duplicate
