"""What a runtime's owner holds of its own durable records, so a hot read needs no store round trip.

The owner of a runtime is its only writer — in a cluster a lease fences every other daemon, and a
lost lease makes the engine forget the runtime, this included — and every write passes the
committer. So the records a transaction made durable are, from then on, what the store would
return, until the next durable change, which the committer applies here too, in commit order
(``committed``). A change the store refused, or whose outcome is unknown (the connection broke at
COMMIT), is forgotten instead (``refused``): the next read goes to the store, which is the truth.

Two kinds of record are held:

* a handle's transcript as a *prefix*: ``held[i]`` is the stored message ``i`` for every ``i`` below
  its length. An empty list is a prefix of any transcript, so any handle a commit touches can be
  held from then on; a message written at the prefix's end extends it, one below replaces, one past
  it leaves it as it is, a truncation cuts it. What a store read returned is offered back
  (``offer``) and taken only if nothing touched that handle while the read was away.
* request-index entries as last committed (the one a ``Resume`` reads is the one its suspension
  wrote).

All runtimes of a daemon share one bound (``HeldBudget``: bytes as the store would encode them),
least recently used first out, so memory does not grow with the number of runtimes. A read the
prefix does not cover, or an entry not held, goes to the store as before: holding is never needed
for correctness, only trusted while the owner is.
"""

from __future__ import annotations

import itertools
import weakref
from collections import OrderedDict
from dataclasses import dataclass, field

import orjson

from ...model import JSON
from ...store.base import Batch

# what all runtimes of a daemon hold together, in bytes as encoded (``--held-memory``): about 1-5x
# that in the process's memory (bench/held_memory.py: 1.2x for 4 KB messages, 2.2x for 400 B, 4.7x for 40 B)
DEFAULT_HELD_BYTES = 16 << 20
# the size counted for a value orjson cannot encode (the store's codec falls back for those)
_UNENCODABLE = 1024
_serials = itertools.count(1)


def _size(value: object) -> int:
    try:
        return len(orjson.dumps(value))
    except TypeError:
        return _UNENCODABLE


class HeldBudget:
    """The daemon's one bound on what its runtimes hold: a least-recently-used order of every held
    item of every runtime, with its size. A runtime forgotten by the engine leaves its items here
    until they come up for eviction (held weakly: its records are freed with it, only their count
    lingers, at the cold end of the order)."""

    def __init__(self, max_bytes: int = DEFAULT_HELD_BYTES) -> None:
        self.max_bytes = max_bytes
        self.total = 0
        # reads answered from what is held, and reads that were not, by record ("transcript",
        # "request"): what an operator sizes ``--held-memory`` by
        self.reads: dict[tuple[str, bool], int] = {(record, held): 0 for record in ("transcript", "request")
                                                   for held in (True, False)}
        self._order: OrderedDict[tuple[int, str], tuple[weakref.ref[HeldRecords], int]] = OrderedDict()

    def touch(self, owner: HeldRecords, key: str) -> None:
        item = (owner.serial, key)
        if item in self._order:
            self._order.move_to_end(item)

    def resize(self, owner: HeldRecords, key: str, size: int) -> None:
        """``key`` of ``owner`` now takes ``size`` bytes and was just used; evict past the bound."""
        item = (owner.serial, key)
        old = self._order.pop(item, None)
        self.total += size - (old[1] if old is not None else 0)
        self._order[item] = (weakref.ref(owner), size)
        self._shrink()

    def release(self, owner: HeldRecords, key: str) -> None:
        old = self._order.pop((owner.serial, key), None)
        if old is not None:
            self.total -= old[1]

    def _shrink(self) -> None:
        while self.total > self.max_bytes and self._order:
            (_, key), (ref, size) = self._order.popitem(last=False)
            self.total -= size
            owner = ref()
            if owner is not None:
                owner.evicted(key)


@dataclass
class _Prefix:
    messages: list[JSON] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    # the ``HeldRecords`` step at which this prefix last changed
    step: int = 0


class HeldRecords:
    """One runtime's held transcripts and request entries (see the module docstring)."""

    def __init__(self, runtime_id: str, budget: HeldBudget | None = None) -> None:
        self._rid = runtime_id
        self._budget = budget if budget is not None else HeldBudget()
        self.serial = next(_serials)
        self._prefixes: dict[str, _Prefix] = {}
        self._requests: dict[str, JSON] = {}
        # advances on every change here; ``_dropped_at`` is the step a prefix last left (evicted or
        # forgotten), so an offer can tell a prefix it never saw change
        self._step = 0
        self._dropped_at = 0

    # ------------------------------------------------------------------ reads

    def transcript(self, handle_id: str, end: int) -> list[JSON] | None:
        """Stored messages ``[0, end)`` of ``handle_id`` (a new list), or None when not all held."""
        prefix = self._prefixes.get(handle_id)
        held = prefix is not None and len(prefix.messages) >= end
        self._budget.reads["transcript", held] += 1
        if prefix is None or not held:
            return None
        self._budget.touch(self, "t" + handle_id)
        return prefix.messages[:end]

    def mark(self) -> int:
        """The step before a store read whose result will be ``offer``-ed."""
        return self._step

    def offer(self, handle_id: str, mark: int, messages: list[JSON]) -> None:
        """Take ``messages`` (stored ``[0, len)``, read since ``mark``) as the handle's prefix when
        nothing touched that handle since the read began, and they say more than the prefix does."""
        if not self._budget.max_bytes:  # --held-memory 0: nothing is held, so nothing is sized
            return
        prefix = self._prefixes.get(handle_id)
        if prefix is None:
            if self._dropped_at > mark:  # it may have been held, changed and dropped meanwhile
                return
            prefix = self._prefixes[handle_id] = _Prefix()
        elif prefix.step > mark or len(prefix.messages) >= len(messages):
            return
        prefix.messages = list(messages)
        prefix.sizes = [_size(m) for m in messages]
        prefix.step = self._advance()
        self._budget.resize(self, "t" + handle_id, sum(prefix.sizes))

    def request(self, request_id: str) -> JSON | None:
        """The entry as last committed, or None when not held (absent from the store or unknown)."""
        rec = self._requests.get(request_id)
        self._budget.reads["request", rec is not None] += 1
        if rec is not None:
            self._budget.touch(self, "r" + request_id)
        return rec

    # ------------------------------------------------------------------ the committer's side

    def committed(self, batch: Batch) -> None:
        """``batch`` (this runtime's part of a transaction) is durable: apply it as the store did —
        a purge, deleted handles, then truncations, then messages — and take its request entries."""
        if not self._budget.max_bytes:  # --held-memory 0: nothing is held, so nothing is sized
            return
        if batch.purge:
            self.clear()
        for (rid, hid), record in batch.handles.items():
            if rid == self._rid and record is None:  # a handle deleted: nothing of it is held
                self._drop(hid)
        touched: dict[str, _Prefix] = {}
        for rid, hid, cut in batch.truncate:
            if rid == self._rid:
                prefix = touched[hid] = self._prefix(hid)
                del prefix.messages[cut:]
                del prefix.sizes[cut:]
        for rid, hid, index, message in batch.messages:
            if rid == self._rid:
                prefix = touched[hid] = touched.get(hid) or self._prefix(hid)
                _write(prefix, index, message)
        for hid, prefix in touched.items():
            prefix.step = self._advance()
            if self._prefixes.get(hid) is prefix:
                self._budget.resize(self, "t" + hid, sum(prefix.sizes))
        for (rid, request_id), rec in batch.requests.items():
            if rid != self._rid:
                continue
            if rec is None:
                self._forget_request(request_id)
            else:
                self._requests[request_id] = rec
                self._budget.resize(self, "r" + request_id, _size(rec))

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
                self._forget_request(request_id)

    def clear(self) -> None:
        """Forget everything (the store was unreachable mid-turn: memory is reloaded from it)."""
        for hid in list(self._prefixes):
            self._drop(hid)
        for request_id in list(self._requests):
            self._forget_request(request_id)
        self._dropped_at = self._advance()

    def evicted(self, key: str) -> None:
        """The budget let ``key`` go (``HeldBudget``): it is no longer held."""
        if key.startswith("t"):
            if self._prefixes.pop(key[1:], None) is not None:
                self._dropped_at = self._advance()
        else:
            self._requests.pop(key[1:], None)

    # ------------------------------------------------------------------ internals

    def _advance(self) -> int:
        self._step += 1
        return self._step

    def _prefix(self, handle_id: str) -> _Prefix:
        prefix = self._prefixes.get(handle_id)
        if prefix is None:
            prefix = self._prefixes[handle_id] = _Prefix()
        return prefix

    def _drop(self, handle_id: str) -> None:
        """Forget the prefix; a read in flight for this handle (held or not) is refused its offer."""
        self._prefixes.pop(handle_id, None)
        self._budget.release(self, "t" + handle_id)
        self._dropped_at = self._advance()

    def _forget_request(self, request_id: str) -> None:
        self._requests.pop(request_id, None)
        self._budget.release(self, "r" + request_id)


def _write(prefix: _Prefix, index: int, message: JSON) -> None:
    """Message ``index`` as stored now: extends the prefix at its end, replaces one below it, and
    leaves a prefix that ends before it as it is (still a prefix)."""
    if index == len(prefix.messages):
        prefix.messages.append(message)
        prefix.sizes.append(_size(message))
    elif 0 <= index < len(prefix.messages):
        prefix.messages[index] = message
        prefix.sizes[index] = _size(message)
