"""The handles of one runtime in memory: a bounded working set over the store (handles parked on disk).

A suspended or idle handle costs bytes on disk, not RAM: only the most
recently used handles (plus the root) are held strongly; the rest are read
back from the store on demand. Identity is never split: every handle still
referenced anywhere — a running turn, a ``Wait``, a ``Resume`` cascade — is
found again through a weak map, so two objects can never stand for one handle.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator

from ...model import ROOT_ID
from .handle import Handle

DEFAULT_CAPACITY = 4096

Loader = Callable[[str], Handle | None]


class HandleCache:
    """``dict``-like access to a runtime's handles, loading misses through ``loader``."""

    def __init__(self, loader: Loader, capacity: int = DEFAULT_CAPACITY) -> None:
        self._loader = loader
        self._capacity = capacity
        self._recent: OrderedDict[str, Handle] = OrderedDict()
        self._alive: weakref.WeakValueDictionary[str, Handle] = weakref.WeakValueDictionary()

    def get(self, hid: str) -> Handle | None:
        h = self._recent.get(hid)
        if h is not None:
            self._recent.move_to_end(hid)
            return h
        h = self._alive.get(hid) or self._loader(hid)
        if h is not None:
            self[hid] = h
        return h

    def peek(self, hid: str) -> Handle | None:
        """The handle if it is in memory; never loads it."""
        return self._recent.get(hid) or self._alive.get(hid)

    def __getitem__(self, hid: str) -> Handle:
        h = self.get(hid)
        if h is None:
            raise KeyError(hid)
        return h

    def __setitem__(self, hid: str, h: Handle) -> None:
        self._alive[hid] = h
        self._recent[hid] = h
        self._recent.move_to_end(hid)
        self._shrink()

    def pop(self, hid: str, default: Handle | None = None) -> Handle | None:
        self._alive.pop(hid, None)
        return self._recent.pop(hid, default)

    def loaded(self) -> Iterator[Handle]:
        """The handles in memory right now (a snapshot; parked ones on disk are not visited)."""
        return iter(list(self._alive.values()))

    def __len__(self) -> int:
        return len(self._alive)

    def _shrink(self) -> None:
        while len(self._recent) > self._capacity:
            hid, h = next(iter(self._recent.items()))
            self._recent.pop(hid)
            if hid == ROOT_ID:  # the anchor of every lookup stays
                self._recent[hid] = h
                if len(self._recent) == 1:
                    return
