"""Budgets: carved at spawn, checked up the ancestor chain before every turn and spawn (docs/protocol.md §4).

A refusal is a value, never a crash: at spawn it is a FAILED_PRECONDITION
naming the limit; before a turn it settles the handle ``incomplete`` with the
pinned text and ``limit`` — partial work preserved.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from ...errors import FailedPrecondition
from ...model import ROOT_ID, Budget
from ..state.handle import Handle

if TYPE_CHECKING:
    from .context import Limits

DEFAULT_MAX_DEPTH = 3
DEFAULT_MAX_CONCURRENT = 8


def carve(rt: Limits, parent: Handle, wanted: Budget) -> Budget:
    """The child's budget: each pool limit is ``min(own, parent remaining)`` where the parent has one."""
    if parent.id == ROOT_ID:
        return wanted
    pb, now = parent.budget, rt.deps.clock.now()
    pools = {
        "max_tokens": pb.max_tokens and max(0, pb.max_tokens - parent.usage.total_tokens),
        "max_tool_calls": pb.max_tool_calls and max(0, pb.max_tool_calls - parent.tool_calls),
        "max_wall_ms": pb.max_wall_ms and max(0, pb.max_wall_ms - int((now - parent.spawned_at) * 1000)),
    }
    carved = {k: _tighter(getattr(wanted, k), left, bool(getattr(pb, k))) for k, left in pools.items()}
    return replace(wanted, **carved)


def _tighter(own: int, remaining: int, parent_limited: bool) -> int:
    if not parent_limited:
        return own
    return min(own, remaining) if own else remaining


def check_spawn(rt: Limits, parent: Handle) -> None:
    """``maxDepth N exceeded`` / ``maxChildren N exceeded`` → FAILED_PRECONDITION."""
    line = [parent, *rt.table.ancestors(parent)]
    max_depth = next((a.budget.max_depth for a in line if a.budget.max_depth), DEFAULT_MAX_DEPTH)
    if parent.depth + 1 > max_depth:
        raise FailedPrecondition(f"maxDepth {max_depth} exceeded")
    limit = parent.budget.max_children
    if limit and parent.spawn_count >= limit:
        raise FailedPrecondition(f"maxChildren {limit} exceeded")
    exhausted = exhausted_limit(rt, parent)
    if exhausted:
        raise FailedPrecondition(f"budget exhausted ({exhausted[0]}); partial work preserved")


def exhausted_limit(rt: Limits, h: Handle) -> tuple[str, str] | None:
    """The first spent pool of ``h`` or an ancestor: (pinned name, TaskResult limit), or None."""
    now = rt.deps.clock.now()
    for a in [h, *rt.table.ancestors(h)]:
        b = a.budget
        if b.max_tokens and a.usage.total_tokens >= b.max_tokens:
            return "tokens", "maxTokens"
        if b.max_tool_calls and a.tool_calls >= b.max_tool_calls:
            return "toolCalls", "maxToolCalls"
        if b.max_wall_ms and (now - a.spawned_at) * 1000 >= b.max_wall_ms:
            return "wallMs", "maxWallMs"
    return None


def max_concurrent(parent: Handle) -> int:
    return parent.budget.max_concurrent or DEFAULT_MAX_CONCURRENT
