"""What the blocking ``Runtime`` and the asyncio ``toolnexus_client.aio.Runtime`` share.

Both clients are thin: each verb builds one request here, sends it over its
own kind of channel (sync grpc or grpc.aio) and converts the reply with
``_convert``. Keeping the request building, the environment defaults and the
worker hello in one place means the two clients cannot drift apart.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from . import _convert as convert
from ._defs import Budget, Llm
from ._gen import runtime_pb2 as pb
from ._types import Answer

try:  # the app's OpenTelemetry, when it has it: its current span becomes the agent's parent
    from opentelemetry import propagate as _otel_propagate
except ImportError:  # not a dependency of the client
    _otel_propagate = None  # type: ignore[assignment]

DEFAULT_TARGET = "127.0.0.1:50051"
TARGET_ENV = "TOOLNEXUS_TARGET"
TOKEN_ENV = "TOOLNEXUS_TOKEN"
RUNTIME_KEY_HEADER = "x-toolnexus-runtime-key"
# grpc's own reconnect backoff grows to minutes; a sidecar that restarts should be found again quickly
CHANNEL_OPTIONS = (("grpc.initial_reconnect_backoff_ms", 100), ("grpc.min_reconnect_backoff_ms", 100),
                   ("grpc.max_reconnect_backoff_ms", 2000))
# a Wait with a timeout is answered by the daemon; the deadline only guards against a dead one
WAIT_DEADLINE_SLACK = 10.0


def resolve_target(target: str | None) -> str:
    """``target``, else ``$TOOLNEXUS_TARGET`` (deploy/pod.yaml sets it), else 127.0.0.1:50051."""
    return target or os.environ.get(TARGET_ENV) or DEFAULT_TARGET


def resolve_token(token: str | None) -> str | None:
    """``token``, else ``$TOOLNEXUS_TOKEN`` (the sidecar's bearer token), else none."""
    return token if token is not None else (os.environ.get(TOKEN_ENV) or None)


def call_metadata(token: str | None, runtime_key: str | None) -> tuple[tuple[str, str], ...]:
    pairs: list[tuple[str, str]] = []
    if token:
        pairs.append(("authorization", f"Bearer {token}"))
    if runtime_key:
        pairs.append((RUNTIME_KEY_HEADER, runtime_key))
    return tuple(pairs)


def with_trace(metadata: Sequence[tuple[str, str]]) -> Sequence[tuple[str, str]]:
    """``metadata`` plus the caller's ``traceparent`` when OpenTelemetry is in the app and a span is
    current: the daemon makes the turns a call starts children of that span."""
    if _otel_propagate is None:
        return metadata
    carrier: dict[str, str] = {}
    _otel_propagate.inject(carrier)
    traceparent = carrier.get("traceparent")
    return (*metadata, ("traceparent", traceparent)) if traceparent else metadata


def resolve_llm(llm: Llm | Mapping[str, Any] | None, transport: object | None) -> Llm:
    if llm is None:
        if transport is None:
            raise ValueError("Runtime.new needs llm= (a model config) or transport= (a model callable)")
        return Llm(style="worker")
    resolved = Llm.of(llm)
    if transport is not None and resolved.style != "worker":
        raise ValueError(f"transport= serves llm style 'worker', but llm style is {resolved.style!r}")
    return resolved


def new_worker_id() -> str:
    return f"py-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def worker_hello(dispatcher: Any, worker_id: str | None, versions: Iterable[int] = ()) -> pb.WorkerHello:
    """The hello of a worker serving exactly its dispatcher's tools (and its transport / resolver),
    for the registry ``versions`` named (none: the runtime's latest)."""
    names = sorted(dispatcher.tools)
    return pb.WorkerHello(runtime_id=dispatcher.runtime_id, worker_id=worker_id or new_worker_id(),
                          tools=names, llm=dispatcher.transport is not None,
                          resolver=dispatcher.resolver is not None, no_tools=not names,
                          versions=sorted(set(versions)))


# ------------------------------------------------------------ requests of the verbs

def wait_ms(wait: float) -> int:
    """A fused call's wait in seconds as the daemon's ``wait_ms``: at least 1 ms (0 would mean no
    wait); a negative wait goes as it is, for the daemon to refuse with INVALID_ARGUMENT."""
    return round(wait * 1000) if wait < 0 else max(1, round(wait * 1000))


def fused_deadline(wait: float | None) -> float | None:
    """The gRPC deadline of a fused call that waits: its wait plus Wait's slack (none otherwise)."""
    return None if wait is None else wait + WAIT_DEADLINE_SLACK


def spawn_request(runtime_id: str, parent: str, agent: str, budget: Budget | Mapping[str, int] | None,
                  prompt: str | None = None, wait: float | None = None) -> pb.SpawnRequest:
    if prompt is not None and not prompt:
        # the daemon wakes on a non-empty prompt only: "" would spawn without the Woken it promises
        raise ValueError("prompt is empty: pass the text that wakes the new handle, or leave prompt unset "
                         "to only spawn it")
    request = pb.SpawnRequest(runtime_id=runtime_id, parent=parent, agent=agent, prompt=prompt or "",
                              wait_ms=0 if wait is None else wait_ms(wait))
    resolved = Budget.of(budget)
    if resolved is not None:
        request.budget.CopyFrom(convert.budget_to_pb(resolved))
    return request


def wake_request(runtime_id: str, handle: str, prompt: str, wait: float | None,
                 upgrade: bool = False) -> pb.WakeRequest:
    return pb.WakeRequest(runtime_id=runtime_id, handle=handle, prompt=prompt,
                          wait_ms=0 if wait is None else wait_ms(wait), upgrade=upgrade)


def wait_request(runtime_id: str, handle: str, timeout: float | None) -> tuple[pb.WaitRequest, float | None]:
    """The Wait request and the gRPC deadline guarding it (none when waiting without a timeout)."""
    timeout_ms = 0 if timeout is None else max(1, round(timeout * 1000))
    deadline = None if timeout is None else timeout + WAIT_DEADLINE_SLACK
    return pb.WaitRequest(runtime_id=runtime_id, handle=handle, timeout_ms=timeout_ms), deadline


def resume_request(runtime_id: str, answer: Answer | Mapping[str, Any], handle: str | None,
                   no_wait: bool, accept_changed_definition: bool = False,
                   upgrade: bool = False) -> pb.ResumeRequest:
    return pb.ResumeRequest(runtime_id=runtime_id, answer=convert.answer_to_pb(Answer.of(answer)),
                            handle=handle or "", no_wait=no_wait,
                            accept_changed_definition=accept_changed_definition, upgrade=upgrade)


def watch_request(runtime_id: str, after_seq: int, types: Iterable[str] | None,
                  handle: str | None) -> pb.WatchRequest:
    return pb.WatchRequest(runtime_id=runtime_id, after_seq=after_seq, types=list(types or ()),
                           handle=handle or "")


def post_request(runtime_id: str, handle: str, text: str, sender: str, channel: str) -> pb.PostRequest:
    item = convert.inbox_item_to_pb(sender, channel, text)
    return pb.PostRequest(runtime_id=runtime_id, handle=handle, item=item)
