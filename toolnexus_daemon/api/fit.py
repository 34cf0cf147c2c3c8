"""Answers that fit in one gRPC message, however large the stored texts behind them.

Each text a snapshot carries is bounded on its own (a model reply, a tool output, an inbox item),
but a ``List`` of many handles, or a ``Snapshot`` with a full inbox, can still add up past
``--max-message-bytes``; gRPC would then refuse to send it and the runtime would be unreadable
through that call for good. Over the budget, the long texts are cut, each to an even share of
it, with a marker saying how much went (docs/operations.md, Limits on peer data).
"""

from __future__ import annotations

from ..bounds import bounded_output
from ._gen import runtime_pb2 as pb

# room for field tags, ids, states and the envelope around the cut texts
_MARGIN = 64 * 1024
_MIN_SHARE = 1024


def fit_snapshots(snaps: list[pb.HandleSnapshot], max_message_bytes: int) -> list[pb.HandleSnapshot]:
    """``snaps`` with their long texts cut when together they would not fit in one message."""
    budget = max(max_message_bytes - _MARGIN, _MIN_SHARE)
    if sum(s.ByteSize() for s in snaps) + 8 * len(snaps) <= budget:
        return snaps
    share = max(budget // max(len(snaps), 1), _MIN_SHARE)
    for snap in snaps:
        _cut(snap, share)
    return snaps


def fit_result(result: pb.TaskResult, max_message_bytes: int) -> pb.TaskResult:
    """A result (Wait, Resume) whose text is cut to what one message carries."""
    if result.ByteSize() > max_message_bytes - _MARGIN:
        _cut_result(result, max(max_message_bytes - _MARGIN, _MIN_SHARE))
    return result


def _cut(snap: pb.HandleSnapshot, share: int) -> None:
    texts = 1 + len(snap.inbox) + (1 if snap.HasField("pending") else 0)
    each = max(share // (texts + 1), _MIN_SHARE // 4)
    if snap.HasField("last_result"):
        _cut_result(snap.last_result, each)
    if snap.HasField("pending"):
        _cut_request(snap.pending, each)
    for item in snap.inbox:
        item.text = bounded_output(item.text, each)


def _cut_result(result: pb.TaskResult, each: int) -> None:
    result.text = bounded_output(result.text, each)
    if result.HasField("pending"):
        _cut_request(result.pending, each)


def _cut_request(request: pb.Request, each: int) -> None:
    request.prompt = bounded_output(request.prompt, each)
    if request.data.ByteSize() > each:
        request.data.Clear()
        request.data.update({"unreadable": f"data over {each} bytes left out to fit the message"})
