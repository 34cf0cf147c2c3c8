"""``state.held``: what an owner holds of its durable records must always be what the store holds.

A model store (a dict of messages per handle) takes every batch the way the stores do — a purge,
deleted handles, truncations, then messages — and the held prefix must be, at every step, a prefix
of it: each held message the stored one at its index, no index skipped."""

from __future__ import annotations

import gc

from hypothesis import given, settings
from hypothesis import strategies as st

from toolnexus_daemon.engine.state.held import HeldBudget, HeldRecords
from toolnexus_daemon.model import JSON
from toolnexus_daemon.store.base import Batch

RID = "r"
HANDLES = ["root/a.1", "root/b.2", "root/c.3"]


class ModelStore:
    """Messages per handle as a store keeps them: by index, a truncation drops the index and above."""

    def __init__(self) -> None:
        self.messages: dict[str, dict[int, JSON]] = {}

    def apply(self, batch: Batch) -> None:
        if batch.purge:
            self.messages.clear()
        for (_, hid), rec in batch.handles.items():
            if rec is None:
                self.messages.pop(hid, None)
        for _, hid, cut in batch.truncate:
            log = self.messages.get(hid, {})
            for index in [i for i in log if i >= cut]:
                del log[index]
        for rid, hid, index, message in batch.messages:
            if rid == RID:
                self.messages.setdefault(hid, {})[index] = message

    def read(self, hid: str, end: int) -> list[JSON]:
        """``[0, end)`` up to the first missing index (the engine writes a transcript without gaps;
        the random batches here do not, so a read offered back stops where the stored run does)."""
        log = self.messages.get(hid, {})
        out: list[JSON] = []
        while len(out) < end and len(out) in log:
            out.append(log[len(out)])
        return out


def _assert_prefix(held: HeldRecords, store: ModelStore) -> None:
    for hid in HANDLES:
        log = store.messages.get(hid, {})
        for end in range(0, 12):
            got = held.transcript(hid, end)
            if got is not None:
                assert all(i in log for i in range(end)), (hid, end, got, log)
                assert got == [log[i] for i in range(end)], (hid, end)


_op = st.one_of(
    st.tuples(st.just("msg"), st.sampled_from(HANDLES), st.integers(0, 4)),
    st.tuples(st.just("cut"), st.sampled_from(HANDLES), st.integers(0, 4)),
    st.tuples(st.just("delete"), st.sampled_from(HANDLES), st.just(0)),
    st.tuples(st.just("purge"), st.just(""), st.just(0)),
    st.tuples(st.just("other"), st.sampled_from(HANDLES), st.integers(0, 9)),
)


def _batch(ops: list[tuple[str, str, int]], serial: int) -> Batch:
    batch = Batch()
    for n, (kind, hid, index) in enumerate(ops):
        if kind == "msg":
            batch.messages.append((RID, hid, index, {"role": "user", "content": f"{serial}.{n}"}))
        elif kind == "cut":
            batch.truncate.append((RID, hid, index))
        elif kind == "delete":
            batch.handles[(RID, hid)] = None
        elif kind == "purge":
            batch.purge.append(RID)
        else:  # another runtime's records in the same transaction: never held here
            batch.messages.append(("other", hid, index, {"role": "user", "content": "elsewhere"}))
    return batch


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.lists(_op, max_size=6), st.booleans(), st.booleans()), max_size=25),
       st.sampled_from([0, 60, 150, 400, 1 << 20]))
def test_the_held_prefix_is_always_a_prefix_of_the_store(
        steps: list[tuple[list[tuple[str, str, int]], bool, bool]], budget: int) -> None:
    """Commits, refusals (the store unchanged, or changed after all: an outcome unknown), and store
    reads offered back — some offered after a commit touched the handle — never leave a held message
    that is not the stored one."""
    store = ModelStore()
    bound = HeldBudget(budget)
    held = HeldRecords(RID, bound)
    for serial, (ops, refused, landed_anyway) in enumerate(steps):
        hid = HANDLES[serial % len(HANDLES)]
        mark = held.mark()
        read = store.read(hid, 10)
        batch = _batch(ops, serial)
        if refused:
            if landed_anyway:
                store.apply(batch)
            held.refused(batch)
        else:
            store.apply(batch)
            held.committed(batch)
        held.offer(hid, mark, read)  # a read that began before this batch: taken only if untouched
        _assert_prefix(held, store)
        fresh = store.read(hid, 10)
        held.offer(hid, held.mark(), fresh)
        _assert_prefix(held, store)
        assert bound.total <= bound.max_bytes


def test_a_committed_transcript_is_held_and_a_resumed_turn_needs_no_read() -> None:
    held = HeldRecords(RID)
    first = Batch(messages=[(RID, "h", 0, {"role": "user", "content": "go"}),
                            (RID, "h", 1, {"role": "assistant", "content": "", "tool_calls": []})])
    held.committed(first)
    held.committed(Batch(messages=[(RID, "h", 2, {"role": "tool", "content": "ok"})]))
    assert [m["role"] for m in held.transcript("h", 3) or []] == ["user", "assistant", "tool"]
    assert held.transcript("h", 4) is None  # more than is held: the caller reads the store


def test_an_offer_is_refused_when_the_handle_changed_while_the_read_was_away() -> None:
    held = HeldRecords(RID)
    mark = held.mark()
    held.committed(Batch(truncate=[(RID, "h", 0)], messages=[(RID, "h", 0, {"content": "new"})]))
    held.offer("h", mark, [{"content": "old"}, {"content": "older"}])
    assert held.transcript("h", 1) == [{"content": "new"}]
    assert held.transcript("h", 2) is None


def test_an_offer_is_refused_when_the_handle_was_dropped_while_the_read_was_away() -> None:
    bound = HeldBudget(60)
    held = HeldRecords(RID, bound)
    mark = held.mark()
    held.committed(Batch(messages=[(RID, "h", 0, {"content": "a" * 30})]))
    held.committed(Batch(messages=[(RID, "g", 0, {"content": "b" * 30})]))  # past the budget: h goes
    assert held.transcript("g", 1) is not None and bound.total <= 60
    held.offer("h", mark, [{"content": "stale"}])
    assert held.transcript("h", 1) is None
    held.offer("h", held.mark(), [{"content": "a"}])  # a read begun after: taken
    assert held.transcript("h", 1) == [{"content": "a"}]


def test_a_refused_batch_forgets_what_it_touched() -> None:
    held = HeldRecords(RID)
    held.committed(Batch(messages=[(RID, "h", 0, {"content": "a"})],
                         requests={(RID, "q"): {"request": {"id": "q"}, "handles": {}}}))
    held.refused(Batch(messages=[(RID, "h", 1, {"content": "b"})], requests={(RID, "q"): None}))
    assert held.transcript("h", 0) is None and held.request("q") is None


def test_request_entries_follow_commits_of_this_runtime_only() -> None:
    held = HeldRecords(RID)
    entry: JSON = {"request": {"id": "a"}, "handles": {"h": {"state": "pending"}}}
    held.committed(Batch(requests={(RID, "a"): entry, ("other", "b"): {"request": {}}}))
    assert held.request("a") == entry and held.request("b") is None
    held.committed(Batch(requests={(RID, "a"): None}))
    assert held.request("a") is None


def test_every_runtime_shares_one_budget_least_recently_used_first_out() -> None:
    """The bound is the daemon's, not each runtime's: a second runtime's records push out the
    first's oldest, a record just read stays, and a runtime the engine forgot frees its share."""
    bound = HeldBudget(220)
    one, two = HeldRecords("one", bound), HeldRecords("two", bound)
    one.committed(Batch(messages=[("one", "h", 0, {"content": "x" * 50})]))
    one.committed(Batch(requests={("one", "q"): {"request": {"id": "q", "prompt": "y" * 50}}}))
    assert one.transcript("h", 1) is not None  # used: the entry is now the older one
    two.committed(Batch(messages=[("two", "k", 0, {"content": "z" * 80})]))
    assert bound.total <= 220
    assert one.request("q") is None and one.transcript("h", 1) is not None
    del one
    gc.collect()
    two.committed(Batch(messages=[("two", "k", 1, {"content": "w" * 100})]))  # needs the forgotten share
    assert two.transcript("k", 2) is not None and bound.total <= 220


def test_a_transcript_past_the_whole_budget_is_not_held() -> None:
    bound = HeldBudget(100)
    held = HeldRecords(RID, bound)
    held.committed(Batch(messages=[(RID, "h", i, {"content": str(i) * 40}) for i in range(3)]))
    assert held.transcript("h", 0) is None and bound.total == 0
    held.offer("h", held.mark(), [{"content": str(i) * 40} for i in range(3)])
    assert held.transcript("h", 0) is None and bound.total == 0
