"""Calls for a runtime another daemon of the cluster owns, sent on to that daemon.

Any daemon takes any call: when the engine answers ``Moved`` (the runtime's lease is held
by a live daemon elsewhere), the call goes to the owner's advertised address with the
caller's metadata (token, runtime key) and what is left of its deadline, and the owner's
answer — reply, stream or error status — comes back unchanged. An owner without an address
(started without ``--advertise``, listening on a wildcard or a unix socket only) cannot be
forwarded to: the call is answered UNAVAILABLE naming it. A forwarded call carries
``x-toolnexus-forwarded-by``; a daemon that receives one for a runtime it does not own
either answers UNAVAILABLE rather than forwarding again (the lease moved meanwhile: the
caller's retry finds the new owner), so a call never circles.

Between daemons the channel is plaintext unless the daemon itself serves TLS; then it
dials with TLS, trusting ``--tls-client-ca`` (or the system roots) and presenting its own
certificate, so a cluster under mTLS works with one CA.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from typing import TypeVar

import grpc
from google.protobuf.message import Message
from grpc import aio

from ..config import Tls
from ..engine.commit.ownership import Moved
from ._gen import runtime_pb2 as pb
from .decode import Refused

SERVICE = pb.DESCRIPTOR.services_by_name["AgentRuntime"]
In = TypeVar("In")  # the caller's context's request type (not relayed by type: any method's)
Out = TypeVar("Out")
Reply = TypeVar("Reply", bound=Message)  # the owner's reply: the method's response message
FORWARDED_BY = "x-toolnexus-forwarded-by"
# metadata a proxy must not copy: gRPC's own and the transport's
_HOP_BY_HOP = ("grpc-", ":")
_DROP = {"user-agent", "content-type", "te", "host"}


def _serialize(message: Message) -> bytes:
    return message.SerializeToString()


def _wire(method: str, reply: type[Reply],
          ) -> tuple[str, Callable[[Message], bytes], Callable[[bytes], Reply]]:
    """The method's path and how its request and reply cross the wire."""
    expected = SERVICE.methods_by_name[method].output_type.full_name
    if reply.DESCRIPTOR.full_name != expected:  # a caller's slip, never the peer's: fail loudly
        raise TypeError(f"{method} answers {expected}, not {reply.DESCRIPTOR.full_name}")
    return f"/{SERVICE.full_name}/{method}", _serialize, reply.FromString


class Forwarder:
    """Channels to the other daemons, one per address, opened on first use."""

    def __init__(self, node: str, tls: Tls | None, max_message_bytes: int) -> None:
        self.node = node
        self._tls = tls
        self._options = [("grpc.max_send_message_length", max_message_bytes),
                         ("grpc.max_receive_message_length", max_message_bytes)]
        self._channels: dict[str, aio.Channel] = {}
        self.forwarded = 0
        # told the runtime id when its owner could not be reached (the membership asks the
        # database again next time instead of trusting where it last saw the runtime)
        self.on_unreachable: Callable[[str], None] = lambda runtime_id: None

    def _channel(self, address: str) -> aio.Channel:
        channel = self._channels.get(address)
        if channel is None:
            if self._tls is None:
                channel = aio.insecure_channel(address, options=self._options)
            else:
                channel = aio.secure_channel(address, self._credentials(), options=self._options)
            self._channels[address] = channel
        return channel

    def _credentials(self) -> grpc.ChannelCredentials:
        assert self._tls is not None
        root = self._tls.client_ca.read_bytes() if self._tls.client_ca else None
        return grpc.ssl_channel_credentials(root_certificates=root, private_key=self._tls.key.read_bytes(),
                                            certificate_chain=self._tls.cert.read_bytes())

    def _metadata(self, context: aio.ServicerContext[In, Out], moved: Moved) -> list[tuple[str, str | bytes]]:
        _reachable(moved)
        incoming = list(context.invocation_metadata() or ())
        if any(k == FORWARDED_BY for k, _ in incoming):
            raise moved  # forwarded here already: no second hop (UNAVAILABLE, the caller retries)
        kept = [(k, v) for k, v in incoming if not k.startswith(_HOP_BY_HOP) and k not in _DROP]
        return [*kept, (FORWARDED_BY, self.node)]

    async def unary(self, method: str, request: Message, context: aio.ServicerContext[In, Out],
                    moved: Moved, reply_type: type[Reply]) -> Reply:
        """The owner's reply to ``request``; its error status becomes this call's."""
        metadata = self._metadata(context, moved)
        call = self._channel(moved.address).unary_unary(*_wire(method, reply_type))
        self.forwarded += 1
        try:
            reply = await call(request, metadata=metadata, timeout=context.time_remaining())
        except aio.AioRpcError as err:
            self._failed(err, moved)
            # a Watch ended for falling behind names the seq to resume after in its trailers
            await context.abort(err.code(), _told(err, moved), trailing_metadata=_resume_trailer(err))
            raise AssertionError("unreachable: context.abort raises") from err
        return reply

    async def stream(self, method: str, request: Message, context: aio.ServicerContext[In, Out],
                     moved: Moved, reply_type: type[Reply]) -> AsyncIterator[Reply]:
        """The owner's stream of replies to ``request``, message by message."""
        metadata = self._metadata(context, moved)
        call = self._channel(moved.address).unary_stream(*_wire(method, reply_type))
        self.forwarded += 1
        async for reply in self._down(call(request, metadata=metadata, timeout=context.time_remaining()),
                                      context, moved):
            yield reply

    async def _down(self, stream: aio.UnaryStreamCall[Message, Reply] | aio.StreamStreamCall[Message, Reply],
                    context: aio.ServicerContext[In, Out], moved: Moved) -> AsyncIterator[Reply]:
        """The owner's replies, one by one; its error status becomes this call's."""
        try:
            async for reply in stream:
                yield reply
        except aio.AioRpcError as err:
            self._failed(err, moved)
            # a Watch ended for falling behind names the seq to resume after in its trailers
            await context.abort(err.code(), _told(err, moved), trailing_metadata=_resume_trailer(err))
        finally:
            stream.cancel()

    def _failed(self, err: aio.AioRpcError, moved: Moved) -> None:
        if err.code() is grpc.StatusCode.UNAVAILABLE:
            self.on_unreachable(moved.runtime_id)

    async def bidi(self, method: str, first: Message, requests: AsyncIterator[Message | Refused],
                   context: aio.ServicerContext[In, Out], moved: Moved,
                   reply_type: type[Reply]) -> AsyncIterator[Reply]:
        """A two-way stream (``Connect``) relayed to the owner: ``first`` (already read here to learn
        the runtime) and every later message go up, every reply comes down. A message this daemon
        could not decode (``decode.Refused``) ends the relay: the worker reconnects."""
        metadata = self._metadata(context, moved)
        call = self._channel(moved.address).stream_stream(*_wire(method, reply_type))
        self.forwarded += 1

        async def upward() -> AsyncIterator[Message]:
            yield first
            async for message in requests:
                if isinstance(message, Refused):
                    return
                yield message

        async for reply in self._down(call(upward(), metadata=metadata, timeout=context.time_remaining()),
                                      context, moved):
            yield reply

    async def send(self, method: str, request: Message, moved: Moved, metadata: list[tuple[str, str]],
                   timeout: float, reply_type: type[Reply]) -> Reply:
        """A call this daemon makes itself (not on a caller's behalf) to ``moved``'s owner, such as
        an answer that came in through a link (``api.resume_forward``); errors are the owner's."""
        _reachable(moved)
        call = self._channel(moved.address).unary_unary(*_wire(method, reply_type))
        self.forwarded += 1
        try:
            sent = [*metadata, (FORWARDED_BY, self.node)]
            reply = await call(request, metadata=sent, timeout=timeout)
        except aio.AioRpcError as err:
            self._failed(err, moved)
            raise
        return reply

    async def close(self) -> None:
        for channel in self._channels.values():
            await channel.close()
        self._channels.clear()


def _reachable(moved: Moved) -> None:
    """An owner with no address (a daemon started without ``--advertise`` on a wildcard or unix
    listener) cannot be forwarded to: the caller hears so (UNAVAILABLE), and its retry reaches the
    runtime once that daemon stops and another takes it over, or when sent to that daemon."""
    if not moved.address:
        raise moved


# how gRPC words a channel that reached nobody (as opposed to an UNAVAILABLE the owner answered)
_NO_ANSWER = ("failed to connect", "connection refused", "socket closed", "connection reset",
              "connections to all backends failing", "unavailable to connect")


def _resume_trailer(err: aio.AioRpcError) -> tuple[tuple[str, str | bytes], ...]:
    """The owner's ``x-toolnexus-resume-after-seq`` trailer, passed on to the caller."""
    trailers: aio.Metadata | None = err.trailing_metadata()
    return tuple((k, v) for k, v in trailers or () if k == "x-toolnexus-resume-after-seq")


def _told(err: aio.AioRpcError, moved: Moved) -> str:
    """The owner's error as the caller hears it: unchanged, unless the owner could not be reached
    at all — then what that means (a takeover once its lease runs out) rather than a bare
    transport error naming an address the caller never dialled."""
    details = err.details() or ""
    if err.code() is not grpc.StatusCode.UNAVAILABLE or not any(m in details.lower() for m in _NO_ANSWER):
        return details
    left = max(0.0, moved.expires_at - time.monotonic()) if moved.expires_at else 0.0
    when = f"within {left:.1f} s" if moved.expires_at else "within one lease"
    return (f'runtime "{moved.runtime_id}" is owned by daemon {moved.owner} at {moved.address}, which does '
            f"not answer ({details.split(';')[0][:120]}); if it is gone, its lease runs out {when} and any "
            "daemon then takes the runtime over: retry then")
