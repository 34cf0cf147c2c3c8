"""The handle summary: the few fields of a handle record that a start and the metrics need.

What a handle record contributes to ``handle_index`` is decided from its
summary, which copies fields of the engine's handle record by name:

  id, state, escalating   as in the record
  queued                  the number of wakes waiting in ``wake_queue``
  pending                 ``{id, kind}`` of the open Request, when there is one
  leaf                    whether the handle raised that Request itself (the last id of
                          ``pending.data.path``, or no path), rather than being suspended
                          on a child's — a nested suspension is one open suspension
  suspended_at            when the handle was parked (absent when the record has none)

and ``contribution`` holds the rules that read them: a handle is recovered on
start when it is running, escalating inline or holding queued wakes; it is
counted by its state (the root excepted, as ``List`` excepts it); and it is an
open suspension when it is a suspended leaf with a pending Request.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..model import JSON, ROOT_ID


def summarize(record: JSON) -> JSON:
    """The summary of one handle record (see the module docstring for its fields)."""
    out: JSON = {"id": record.get("id"), "state": record.get("state"),
                 "escalating": bool(record.get("escalating")), "queued": len(record.get("wake_queue") or [])}
    pending = record.get("pending")
    if isinstance(pending, dict) and pending.get("id"):
        out["pending"] = {"id": pending.get("id"), "kind": pending.get("kind", "")}
        data = pending.get("data")
        path = data.get("path") if isinstance(data, dict) else None
        out["leaf"] = not path or not isinstance(path, list) or _names(path, record.get("id"))
    if record.get("suspended_at"):
        out["suspended_at"] = record["suspended_at"]
    return out


def _names(path: list[object], handle_id: object) -> bool:
    """Whether ``data.path`` ends at this handle: id segments (``"/".join`` is the id), or the
    full ids that records written before segments were introduced carry."""
    return "/".join(str(p) for p in path) == handle_id or path[-1] == handle_id


@dataclass(frozen=True)
class Contribution:
    """What one handle adds to the indexes: a recovery row, one count under ``state`` and, for an
    open suspension, one count and one age row under ``open_kind``."""

    recover: bool
    state: str | None
    open_kind: str | None
    since: float


def needs_recovery(summary: JSON) -> bool:
    """Running (or escalating inline) handles continue on start; queued wakes may need a slot."""
    return (summary.get("state") == "running" or bool(summary.get("escalating"))
            or bool(summary.get("queued")))


def contribution(summary: JSON) -> Contribution:
    is_root = summary.get("id") == ROOT_ID
    state = None if is_root else str(summary.get("state") or "")
    pending = summary.get("pending") or {}
    is_open = (not is_root and state == "suspended" and bool(pending.get("id")) and bool(summary.get("leaf")))
    return Contribution(recover=needs_recovery(summary), state=state,
                        open_kind=str(pending.get("kind") or "") if is_open else None,
                        since=float(summary.get("suspended_at") or 0.0) if is_open else 0.0)
