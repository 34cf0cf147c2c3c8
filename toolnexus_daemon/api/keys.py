"""Runtime lookup for an RPC: the runtime it names, after its runtime key is checked.

A runtime created with ``runtime_key`` only answers calls that present the same
secret as ``x-toolnexus-runtime-key`` metadata (Connect and Watch included);
every servicer method that names a runtime goes through ``open_runtime``.
"""

from __future__ import annotations

from typing import Any

from grpc import aio

from ..engine.engine import Engine
from ..engine.runtime import Runtime

RUNTIME_KEY_HEADER = "x-toolnexus-runtime-key"


def presented_key(context: aio.ServicerContext[Any, Any]) -> str:
    """The runtime key the caller sent, or "" when it sent none."""
    for key, value in context.invocation_metadata() or ():
        if key == RUNTIME_KEY_HEADER:
            return value if isinstance(value, str) else value.decode()
    return ""


async def open_runtime(engine: Engine, runtime_id: str, context: aio.ServicerContext[Any, Any]) -> Runtime:
    """The runtime ``runtime_id``: INVALID_ARGUMENT, NOT_FOUND or PERMISSION_DENIED otherwise (and in a
    cluster ``Moved`` when another daemon owns it)."""
    rt = await engine.open(runtime_id)
    if rt.key_digest:  # only a protected runtime pays for reading the metadata
        engine.check_key(rt, presented_key(context))
    return rt
