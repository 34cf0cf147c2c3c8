"""The handle table of one runtime: the cache, loads from the store, tree walks, and the
reload of handles a refused commit left ahead of the store.

It is the one owner of "which ``Handle`` object stands for this id", and the only owner of the
cache that answers it (``handle_cache``): verbs and turns look handles up, add new ones and walk
the tree through the table's methods, the committer asks it to settle before a commit and to
restore after a refusal, and the runtime lifecycle asks it for the handles recovery needs.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterator

from ...errors import DataLoss, InvalidArgument, NotFound, StoreError, StoreUnavailable
from ...model import JSON, ROOT_ID, HandleState
from ...store.base import Store
from .checkpoint import Checkpoint
from .handle import Handle, children_log, storable_id
from .handle_cache import HandleCache
from .held import HeldBudget, HeldRecords

log = logging.getLogger("toolnexus_daemon.engine")
# a handle's id, record and checkpoint as the store holds them (None: absent)
Stored = tuple[str, JSON | None, JSON | None]


class HandleTable:
    def __init__(self, store: Store, runtime_id: str, held: HeldBudget | None = None) -> None:
        self._store = store
        self._rid = runtime_id
        self._cache = HandleCache(self._load)
        # transcripts and request entries as this owner last committed them (``held``)
        self.held = HeldRecords(runtime_id, held)
        # handles a failed commit left ahead of an unreachable store (see ``restore``)
        self._unrestored: dict[str, Handle] = {}

    # ------------------------------------------------------------------ loads

    def load_recovering(self, stored: list[Stored]) -> list[Handle]:
        """Keep in memory only what recovery needs; parked handles stay on disk until used.

        ``stored``: the records ``recovery_records`` read (through ``Store.read``) from the
        store's recovery index, not every handle record, so a start costs the same whether 10
        or 100,000 handles are parked."""
        out: list[Handle] = []
        for hid, rec, cp in stored:
            if rec is None:
                raise StoreError(f"recovery/{self._rid}/{hid} names a handle with no record")
            h = self._build(rec, cp)
            self._cache[h.id] = h
            out.append(h)
        return out

    async def fetch(self, handle_ids: list[str]) -> bool:
        """Load ``handle_ids`` and their ancestors into the cache through ``Store.read`` (off the
        event loop), so the lookups that follow (``handle``, ``ancestors``) find them in memory.
        A handle loaded meanwhile by someone else is kept (one object per handle); a record that
        cannot be read is left for the lookup, which reports it as it always does. Returns whether
        the store was read (something was awaited)."""
        wanted = [hid for hid in dict.fromkeys(handle_ids) if storable_id(hid)]
        read = False
        while wanted:
            missing = [hid for hid in wanted if self._cache.peek(hid) is None]
            if not missing:
                break
            read = True
            try:
                found = await self._store.read(functools.partial(_records, self._rid, missing))
            except StoreError:
                break
            wanted = []
            for hid, (rec, cp) in zip(missing, found, strict=True):
                if rec is None or self._cache.peek(hid) is not None:
                    continue
                try:
                    h = self._build(rec, cp)
                except (StoreError, ValueError, KeyError, TypeError):
                    continue  # the lookup reads it again and reports it (DATA_LOSS)
                self._cache[hid] = h
                if h.parent is not None:
                    wanted.append(h.parent)
        return read

    def _load(self, handle_id: str) -> Handle | None:
        rec = self._store.get_handle(self._rid, handle_id)
        return self._read(rec) if rec is not None else None

    def _read(self, rec: JSON) -> Handle:
        return self._build(rec, self._store.get_checkpoint(self._rid, str(rec.get("id"))))

    def _build(self, rec: JSON, cp: JSON | None) -> Handle:
        """The handle of ``rec`` with its checkpoint ``cp`` (both as the store holds them)."""
        h = Handle.from_json(rec)
        if h.spawn_count:
            h.read_children = self._children_reader(h.id)
        h.cp = Checkpoint.from_json(cp) if cp else None
        return h

    def _children_reader(self, handle_id: str) -> Callable[[], list[str]]:
        store, rid = self._store, self._rid
        return lambda: _child_logs(rid, [handle_id], store)[0]

    # ------------------------------------------------------------------ refused commits

    def restore(self, handles: dict[str, Handle]) -> None:
        """After a failed commit, the store is the truth: reload ``handles`` in place (whoever
        holds a handle keeps holding the one the cache hands out). When the store cannot be read
        either (its database is away), they are remembered and reloaded by ``settle_restores``
        before the next lookup or commit."""
        self._unrestored.update(handles)
        try:
            self.settle_restores()
        except StoreUnavailable as exc:
            log.warning("handles not reloaded after a failed commit; retried once the store is back",
                        extra={"runtime": self._rid, "handles": sorted(self._unrestored), "error": str(exc)})

    def settle_restores(self) -> None:
        """Reload the handles a failed commit left ahead of the store; raises ``StoreUnavailable``
        (nothing changed) while the store still cannot be read."""
        if not self._unrestored:
            return
        records = {hid: self._store.get_handle(self._rid, hid) for hid in self._unrestored}
        for hid, rec in records.items():
            h = self._unrestored[hid]
            if rec is None:
                self._cache.pop(hid, None)
            else:
                h.restore_from(self._read(rec))
        self._unrestored.clear()

    def reload_mid_turn(self, keep: Callable[[Handle], bool]) -> list[Handle]:
        """After the store was unreachable mid-turn (``residency.heal``): every handle in memory that
        is mid-turn, every handle the store's recovery index names and every handle a refused
        commit left ahead, reloaded in place from the store — except those ``keep`` spares (a
        turn started since runs on them). Returns the handles recovery continues (loaded, not
        spared). Raises ``StoreUnavailable`` (nothing reloaded) while the store cannot be read."""
        named = self._store.handles_to_recover(self._rid)
        self.held.clear()  # commits of this outage may have landed or not: the store is the truth
        mid = [h for h in self._cache.loaded()
               if h.state is HandleState.RUNNING or h.escalating or h.wake_queue]
        self._unrestored.update({h.id: h for h in mid if not keep(h)})
        self.settle_restores()
        out: list[Handle] = []
        for hid in dict.fromkeys([*named, *(h.id for h in mid)]):
            h = self._cache.get(hid)
            if h is not None and not keep(h):
                out.append(h)
        return out

    # ------------------------------------------------------------------ lookups

    def add(self, h: Handle) -> None:
        """Hold a handle made here (a spawn, the root): the one object that stands for its id."""
        self._cache[h.id] = h

    def get(self, handle_id: str) -> Handle | None:
        """The handle, read from the store if it is parked there; None when the store has none."""
        return self._cache.get(handle_id)

    def known(self, handle_id: str) -> Handle:
        """A handle another one names (its parent, a child): read from the store if parked there;
        ``KeyError`` when the store has none."""
        return self._cache[handle_id]

    def peek(self, handle_id: str) -> Handle | None:
        """The handle if it is in memory; never reads the store."""
        return self._cache.peek(handle_id)

    def loaded(self) -> Iterator[Handle]:
        """The handles in memory right now (a snapshot; parked ones on disk are not visited)."""
        return self._cache.loaded()

    def handle(self, handle_id: str) -> Handle:
        if not handle_id:
            raise InvalidArgument("handle is required (a handle id such as root/worker.1)")
        try:
            self.settle_restores()
            h = self._cache.get(handle_id) if storable_id(handle_id) else None
        except StoreUnavailable:  # the database is away: UNAVAILABLE, the record is not damaged
            raise
        except StoreError as exc:  # a damaged record costs that handle, not the runtime or the daemon
            log.error("handle record cannot be read", extra={"runtime": self._rid, "handle": handle_id,
                                                             "error": str(exc)})
            raise DataLoss(f'handle "{handle_id}" of runtime "{self._rid}" cannot be read: {exc}') from exc
        if h is None:
            raise NotFound(f'unknown handle "{handle_id}" in runtime "{self._rid}"')
        return h

    def ancestors(self, h: Handle) -> list[Handle]:
        out: list[Handle] = []
        parent = h.parent
        while parent is not None:
            p = self._cache[parent]
            out.append(p)
            parent = p.parent
        return out

    async def walk(self, root_id: str = ROOT_ID) -> list[Handle]:
        """``preorder(root_id)`` with every handle and child list of the subtree read first through
        ``Store.read`` (off the event loop on PostgreSQL), a level of the tree per read: the walks
        of List, Close, Interrupt and Shutdown never wait on the store while holding the loop.
        The handles are held while the walk runs, so the cache finds every one of them."""
        held: list[Handle] = []
        frontier = [root_id]
        while frontier:
            await self.fetch(frontier)
            level = [h for hid in frontier if (h := self._cache.peek(hid)) is not None]
            unread = [h for h in level if not h.children_read]
            if unread:
                try:
                    logs = await self._store.read(functools.partial(_child_logs, self._rid,
                                                                    [h.id for h in unread]))
                except StoreError:
                    logs = []  # left for the walk below, which reports it as it always does
                for h, ids in zip(unread, logs, strict=False):
                    if not h.children_read:
                        h.take_stored_children(ids)
            held.extend(level)
            frontier = [c for h in level if h.children_read for c in h.children]
        return self.preorder(root_id)

    def preorder(self, root_id: str = ROOT_ID) -> list[Handle]:
        out: list[Handle] = []
        stack = [root_id]
        while stack:
            h = self._cache[stack.pop()]
            out.append(h)
            stack.extend(reversed(h.children))
        return out


def _child_logs(runtime_id: str, handle_ids: list[str], store: Store) -> list[list[str]]:
    """Each handle's stored child ids, in one ``Store.read``."""
    return [[m["id"] for m in store.messages(runtime_id, children_log(hid))] for hid in handle_ids]


def _records(runtime_id: str, handle_ids: list[str], store: Store) -> list[tuple[JSON | None, JSON | None]]:
    """Each handle's record and checkpoint, in one ``Store.read``."""
    return [(store.get_handle(runtime_id, hid), store.get_checkpoint(runtime_id, hid)) for hid in handle_ids]


def recovery_records(store: Store, runtime_id: str) -> list[Stored]:
    """The id, record and checkpoint of the root and of every handle the recovery index names."""
    ids = list(dict.fromkeys([ROOT_ID, *store.handles_to_recover(runtime_id)]))
    return [(hid, rec, cp) for hid, (rec, cp) in zip(ids, _records(runtime_id, ids, store), strict=True)]
