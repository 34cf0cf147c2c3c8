"""The garbage collector's settings for a long-running daemon: fewer, cheaper collections.

A full collection walks every tracked object; with the start-up objects alone
(imported modules, generated protobuf classes, gRPC) that is tens of thousands,
and it runs on the event loop, where every RPC of every runtime waits for it.
``tune`` raises the young-generation threshold (a young collection per 700
allocations is mostly spent re-walking survivors of a busy request path) and
``freeze`` moves everything alive at the end of start-up into the permanent
generation, which no collection walks again. Reference counting still frees
almost everything at once; the collector is only for cycles.
"""

from __future__ import annotations

import gc

# allocations minus deallocations between young collections (CPython's default: 700); the older
# generations keep their defaults, so a full collection still runs once the survivors pile up
YOUNG_THRESHOLD = 20_000


def tune() -> None:
    """Raise the young-generation threshold (once, at process start)."""
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)


def freeze() -> None:
    """Collect once, then exempt everything still alive from later collections (end of start-up)."""
    gc.collect()
    gc.freeze()
