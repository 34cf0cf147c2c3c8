"""What a runtime's owner holds of its own durable records, so a hot read needs no store round trip.

The owner of a runtime is its only writer — in a cluster a lease fences every other daemon, and a
lost lease makes the engine forget the runtime, this included — and every write passes the
committer. So the records a transaction made durable are, from then on, what the store would
return, until the next durable change, which the committer applies here too, in commit order
(``committed``). A change the store refused, or whose outcome is unknown (the connection broke at
COMMIT), is forgotten instead (``refused``): the next read goes to the store, which is the truth.

Two kinds of record are held, each bounded (least recently used first out):

* a handle's transcript as a *prefix*: ``held[i]`` is the stored message ``i`` for every ``i`` below
  its length. An empty list is a prefix of any transcript, so any handle a commit touches can be
  held from then on; a message written at the prefix's end extends it, one below replaces, one past
  it leaves it as it is, a truncation cuts it. What a store read returned is offered back
  (``offer``) and taken only if nothing touched that handle while the read was away.
* request-index entries as last committed (the one a ``Resume`` reads is the one its suspension
  wrote).

A read the prefix does not cover, or an entry not held, goes to the store as before: holding is
never required for correctness, only trusted while the owner is.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

from ...model import JSON
from ...store.base import Batch

# handles whose transcript prefix is held, per runtime
MAX_TRANSCRIPTS = 64
# a transcript longer than this is not held (its reads go to the store)
MAX_HELD_MESSAGES = 1024
# request-index entries held, per runtime
MAX_REQUESTS = 256


@dataclass
class _Prefix:
    messages: list[JSON] = field(default_factory=list)
    # the ``HeldRecords`` step at which this prefix last changed
    step: int = 0


class HeldRecords:
    """One runtime's held transcripts and request entries (see the module docstring)."""

    def __init__(self, runtime_id: str, transcripts: int = MAX_TRANSCRIPTS,
                 max_messages: int = MAX_HELD_MESSAGES, requests: int = MAX_REQUESTS) -> None:
        self._rid = runtime_id
        self._max_transcripts, self._max_messages, self._max_requests = transcripts, max_messages, requests
        self._prefixes: OrderedDict[str, _Prefix] = OrderedDict()
        self._requests: OrderedDict[str, JSON] = OrderedDict()
        # advances on every change here; ``_dropped_at`` is the step a prefix last left (evicted,
        # grown past the bound or forgotten), so an offer can tell a prefix it never saw change
        self._step = 0
        self._dropped_at = 0

    # ------------------------------------------------------------------ reads

    def transcript(self, handle_id: str, end: int) -> list[JSON] | None:
        """Stored messages ``[0, end)`` of ``handle_id`` (a new list), or None when not all held."""
        prefix = self._prefixes.get(handle_id)
        if prefix is None or len(prefix.messages) < end:
            return None
        self._prefixes.move_to_end(handle_id)
        return prefix.messages[:end]

    def mark(self) -> int:
        """The step before a store read whose result will be ``offer``-ed."""
        return self._step

    def offer(self, handle_id: str, mark: int, messages: list[JSON]) -> None:
        """Take ``messages`` (stored ``[0, len)``, read since ``mark``) as the handle's prefix when
        nothing touched that handle since the read began, and they say more than the prefix does."""
        if len(messages) > self._max_messages:
            return
        prefix = self._prefixes.get(handle_id)
        if prefix is None:
            if self._dropped_at > mark:  # it may have been held, changed and dropped meanwhile
                return
            prefix = self._prefix(handle_id)
        elif prefix.step > mark or len(prefix.messages) >= len(messages):
            return
        prefix.messages = list(messages)
        prefix.step = self._advance()

    def request(self, request_id: str) -> JSON | None:
        """The entry as last committed, or None when not held (absent from the store or unknown)."""
        rec = self._requests.get(request_id)
        if rec is not None:
            self._requests.move_to_end(request_id)
        return rec

    # ------------------------------------------------------------------ the committer's side

    def committed(self, batch: Batch) -> None:
        """``batch`` (this runtime's part of a transaction) is durable: apply it as the store did —
        a purge, deleted handles, then truncations, then messages — and take its request entries."""
        if batch.purge:
            self.clear()
        for (rid, hid), record in batch.handles.items():
            if rid == self._rid and record is None:  # a handle deleted: nothing of it is held
                self._drop(hid)
        for rid, hid, cut in batch.truncate:
            if rid == self._rid:
                self._cut(hid, cut)
        for rid, hid, index, message in batch.messages:
            if rid == self._rid:
                self._write(hid, index, message)
        for (rid, request_id), rec in batch.requests.items():
            if rid != self._rid:
                continue
            if rec is None:
                self._requests.pop(request_id, None)
            else:
                self._requests[request_id] = rec
                self._requests.move_to_end(request_id)
                if len(self._requests) > self._max_requests:
                    self._requests.popitem(last=False)

    def refused(self, batch: Batch) -> None:
        """``batch`` was refused or its outcome is unknown: forget everything it touched."""
        if batch.purge:
            self.clear()
        for rid, hid in batch.handles:
            if rid == self._rid:
                self._drop(hid)
        for rid, hid, _ in batch.truncate:
            if rid == self._rid:
                self._drop(hid)
        for rid, hid, _, _ in batch.messages:
            if rid == self._rid:
                self._drop(hid)
        for rid, request_id in batch.requests:
            if rid == self._rid:
                self._requests.pop(request_id, None)

    def clear(self) -> None:
        """Forget everything (the store was unreachable mid-turn: memory is reloaded from it)."""
        self._prefixes.clear()
        self._requests.clear()
        self._dropped_at = self._advance()

    # ------------------------------------------------------------------ internals

    def _advance(self) -> int:
        self._step += 1
        return self._step

    def _prefix(self, handle_id: str) -> _Prefix:
        prefix = self._prefixes.get(handle_id)
        if prefix is None:
            prefix = self._prefixes[handle_id] = _Prefix()
            if len(self._prefixes) > self._max_transcripts:
                self._prefixes.popitem(last=False)
                self._dropped_at = self._advance()
        else:
            self._prefixes.move_to_end(handle_id)
        return prefix

    def _cut(self, handle_id: str, cut: int) -> None:
        prefix = self._prefix(handle_id)
        del prefix.messages[cut:]
        prefix.step = self._advance()

    def _write(self, handle_id: str, index: int, message: JSON) -> None:
        prefix = self._prefix(handle_id)
        held = prefix.messages
        if index == len(held):
            held.append(message)
        elif 0 <= index < len(held):
            held[index] = message
        prefix.step = self._advance()
        if len(held) > self._max_messages:
            self._drop(handle_id)

    def _drop(self, handle_id: str) -> None:
        """Forget the prefix; a read in flight for this handle (held or not) is refused its offer."""
        self._prefixes.pop(handle_id, None)
        self._dropped_at = self._advance()
