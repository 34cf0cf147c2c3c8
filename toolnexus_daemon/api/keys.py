"""Runtime lookup for an RPC: the runtime it names, after its runtime key is checked.

A runtime created with ``runtime_key`` only answers calls that present the same
secret as ``x-toolnexus-runtime-key`` metadata (Connect and Watch included);
every servicer method that names a runtime goes through ``open_runtime``.
"""

from __future__ import annotations

from typing import Any

from grpc import aio

from ..engine import links
from ..engine.verbs.engine import Engine
from ..engine.verbs.runtime import Runtime

RUNTIME_KEY_HEADER = "x-toolnexus-runtime-key"
# an answer a daemon of the cluster forwards from an answer link: the link stands in for the key
ANSWER_LINK_HEADER = "x-toolnexus-answer-link"


def presented_key(context: aio.ServicerContext[Any, Any], header: str = RUNTIME_KEY_HEADER) -> str:
    """The runtime key (or ``header``) the caller sent, or "" when it sent none."""
    for key, value in context.invocation_metadata() or ():
        if key == header:
            return value if isinstance(value, str) else value.decode()
    return ""


async def open_runtime(engine: Engine, runtime_id: str, context: aio.ServicerContext[Any, Any]) -> Runtime:
    """The runtime ``runtime_id``: INVALID_ARGUMENT, NOT_FOUND or PERMISSION_DENIED otherwise (and in a
    cluster ``Moved`` when another daemon owns it)."""
    rt = await engine.open(runtime_id)
    if rt.key_digest:  # only a protected runtime pays for reading the metadata
        engine.check_key(rt, presented_key(context))
    return rt


async def open_for_answer(engine: Engine, runtime_id: str, request_id: str, handle: str,
                          context: aio.ServicerContext[Any, Any]) -> Runtime:
    """``open_runtime`` for ``Resume``: an answer link minted for exactly this request and handle
    (``x-toolnexus-answer-link``, sent by a daemon of the cluster forwarding a link's answer)
    stands in for the runtime key, for this one answer only."""
    rt = await engine.open(runtime_id)
    if rt.key_digest:
        link_key = presented_key(context, ANSWER_LINK_HEADER)
        if not await engine.store.read(lambda s: links.opens(s, link_key, runtime_id, request_id, handle)):
            engine.check_key(rt, presented_key(context))
    return rt
