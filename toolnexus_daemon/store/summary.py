"""The handle-state index: a few fields of every handle record, kept beside it.

A start must find the handles that need recovery and count handles by state
(metrics) without reading every handle record: with 100,000 parked handles
that read pages the whole handles table into the process and parses ~1 KB of
JSON per handle. So with every handle record the store writes (or deletes),
in the same transaction, its *summary* under the same key in the
``handle_states`` table — about 100 bytes — and a start scans only that.

The summary copies fields of the engine's handle record by name; it is a
projection, with no rules of its own (``_needs_recovery`` and the metrics
census decide what the fields mean):

  id, state, escalating   as in the record
  queued                  the number of wakes waiting in ``wake_queue``
  pending                 ``{id, kind}`` of the open Request, when there is one
  suspended_at            when the handle was parked (absent when the record has none)
"""

from __future__ import annotations

from ..model import JSON


def summarize(record: JSON) -> JSON:
    """The summary of one handle record (see the module docstring for its fields)."""
    out: JSON = {"id": record.get("id"), "state": record.get("state"),
                 "escalating": bool(record.get("escalating")), "queued": len(record.get("wake_queue") or [])}
    pending = record.get("pending")
    if isinstance(pending, dict) and pending.get("id"):
        out["pending"] = {"id": pending.get("id"), "kind": pending.get("kind", "")}
    if record.get("suspended_at") is not None:
        out["suspended_at"] = record["suspended_at"]
    return out
