"""The Store contract: every test here runs against MemoryStore, LmdbStore and PgStore alike."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import pytest

from toolnexus_daemon.errors import StoreError
from toolnexus_daemon.model import JSON
from toolnexus_daemon.store import Batch, Store
from toolnexus_daemon.store.codec import FORMAT_VERSION

from .samples import event, record, rich_event


def messages_batch(rid: str, hid: str, count: int, first: int = 0) -> Batch:
    return Batch(messages=[(rid, hid, i, {"role": "user", "content": f"m{i}"}) for i in range(first, count)])


def contents(store: Store, rid: str, hid: str, start: int = 0, end: int | None = None) -> list[str]:
    return [m["content"] for m in store.messages(rid, hid, start, end)]


async def test_every_table_round_trips(store: Store) -> None:
    """What a batch puts in each table reads back equal."""
    events = [event("r1", 1), rich_event("r1", 2)]
    await store.commit(Batch(
        runtimes={"r1": record(id="r1")}, handles={("r1", "root"): record(id="root")},
        messages=[("r1", "root", 0, {"role": "user", "content": "hi"})],
        checkpoints={("r1", "root"): record(step=3)}, requests={("r1", "req-1"): record(handle="root")},
        events=events))

    assert store.runtime_ids() == ["r1"]
    assert store.get_runtime("r1") == record(id="r1")
    assert store.get_handle("r1", "root") == record(id="root")
    assert store.handles("r1") == [record(id="root")]
    assert store.messages("r1", "root") == [{"role": "user", "content": "hi"}]
    assert store.get_checkpoint("r1", "root") == record(step=3)
    assert store.get_request("r1", "req-1") == record(handle="root")
    assert store.events("r1") == events


async def test_missing_records_read_as_empty(store: Store) -> None:
    """Reads of keys never written return None, empty lists or seq 0."""
    assert store.runtime_ids() == []
    assert store.get_runtime("r1") is None
    assert store.get_handle("r1", "root") is None
    assert store.handles("r1") == []
    assert store.messages("r1", "root") == []
    assert store.get_checkpoint("r1", "root") is None
    assert store.get_request("r1", "q") is None
    assert store.events("r1") == []
    assert store.last_seq("r1") == 0


async def test_records_are_copies(store: Store) -> None:
    """Neither the committed batch nor a read result aliases what the store holds."""
    rec = record(id="root")
    batch = Batch(handles={("r1", "root"): rec})
    await store.commit(batch)
    rec["text"] = "changed after commit"
    batch.handles[("r1", "root")] = {"replaced": True}
    read = store.get_handle("r1", "root")
    assert read is not None
    read["nested"]["list"].append("changed by reader")

    assert store.get_handle("r1", "root") == record(id="root")


async def test_none_deletes(store: Store) -> None:
    """A None value deletes the record in every keyed table and leaves its neighbours."""
    keep, drop = ("r1", "keep"), ("r1", "drop")
    await store.commit(Batch(runtimes={"r1": {}, "r2": {}}, handles={keep: {}, drop: {}},
                             checkpoints={keep: {}, drop: {}}, requests={keep: {}, drop: {}}))
    await store.commit(Batch(runtimes={"r2": None}, handles={drop: None}, checkpoints={drop: None},
                             requests={drop: None, ("r1", "never-written"): None}))

    assert store.runtime_ids() == ["r1"]
    assert [store.get_handle(*drop), store.get_checkpoint(*drop), store.get_request(*drop)] == [None] * 3
    assert [store.get_handle(*keep), store.get_checkpoint(*keep), store.get_request(*keep)] == [{}] * 3


async def test_runtime_ids_in_key_order(store: Store) -> None:
    await store.commit(Batch(runtimes={rid: {} for rid in ("rt-b", "rt-a10", "rt-a", "rt-a2")}))
    assert store.runtime_ids() == ["rt-a", "rt-a10", "rt-a2", "rt-b"]


async def test_handles_in_key_order_and_per_runtime(store: Store) -> None:
    """handles() lists one runtime's handles by id, not another runtime's whose id extends it."""
    ids = ["root/b", "root", "root/a", "root/a2"]
    handles: dict[tuple[str, str], JSON | None] = {("r1", h): {"id": h} for h in ids}
    handles[("r10", "root")] = {"id": "other"}
    await store.commit(Batch(handles=handles))

    assert [h["id"] for h in store.handles("r1")] == ["root", "root/a", "root/a2", "root/b"]
    assert [h["id"] for h in store.handles("r10")] == ["other"]


async def test_messages_range(store: Store) -> None:
    """messages() returns start <= index < end in index order, across gaps and handles."""
    await store.commit(Batch(messages=[("r1", "h", i, {"content": f"m{i}"}) for i in (12, 0, 3, 4, 256)]))
    await store.commit(messages_batch("r1", "h2", 2))

    assert contents(store, "r1", "h") == ["m0", "m3", "m4", "m12", "m256"]
    assert contents(store, "r1", "h", 3, 12) == ["m3", "m4"]
    assert contents(store, "r1", "h", 5) == ["m12", "m256"]
    assert contents(store, "r1", "h", 4, 4) == []
    assert contents(store, "r1", "h2") == ["m0", "m1"]


async def test_truncate(store: Store) -> None:
    """truncate drops that index and every later one of that handle only, before the batch's appends."""
    await store.commit(messages_batch("r1", "a", 5))
    await store.commit(messages_batch("r1", "b", 3))
    await store.commit(Batch(truncate=[("r1", "a", 2)]))
    assert contents(store, "r1", "a") == ["m0", "m1"]
    assert contents(store, "r1", "b") == ["m0", "m1", "m2"]

    await store.commit(Batch(truncate=[("r1", "b", 1)], messages=[("r1", "b", 1, {"content": "new"})]))
    assert contents(store, "r1", "b") == ["m0", "new"]


async def test_purge(store: Store) -> None:
    """purge deletes every record of one runtime in every table, before the batch's puts."""
    for rid in ("r1", "r10"):
        await store.commit(Batch(runtimes={rid: {}}, handles={(rid, "root"): {}},
                                 checkpoints={(rid, "root"): {}}, requests={(rid, "q"): {}},
                                 events=[event(rid, 1)], messages=[(rid, "root", 0, {"content": "m0"})]))

    await store.commit(Batch(purge=["r1"]))
    assert store.runtime_ids() == ["r10"]
    assert store.handles("r1") == [] and store.messages("r1", "root") == []
    assert store.get_checkpoint("r1", "root") is None and store.get_request("r1", "q") is None
    assert store.events("r1") == [] and store.last_seq("r1") == 0
    assert store.handles("r10") == [{}] and store.last_seq("r10") == 1

    await store.commit(Batch(purge=["r10"], runtimes={"r10": {"fresh": True}}))
    assert store.get_runtime("r10") == {"fresh": True}
    assert store.handles("r10") == []


async def test_events_after_seq_limit_and_last_seq(store: Store) -> None:
    """events() pages by seq per runtime; last_seq is the highest stored seq."""
    await store.commit(Batch(events=[event("r1", s) for s in (3, 1, 2, 300, 4)]))
    await store.commit(Batch(events=[event("r0", 9), event("r10", 7)]))

    assert [e.seq for e in store.events("r1")] == [1, 2, 3, 4, 300]
    assert [e.seq for e in store.events("r1", after_seq=2, limit=2)] == [3, 4]
    assert [e.seq for e in store.events("r1", after_seq=4)] == [300]
    assert store.events("r1", after_seq=300) == [] and store.events("r1", limit=0) == []
    assert [store.last_seq(r) for r in ("r0", "r1", "r10", "r2")] == [9, 300, 7, 0]


async def test_events_page_by_bytes(store: Store) -> None:
    """With max_bytes a page stops once the records read reach it, and always holds one event."""
    big = [replace(event("r1", s), note="n" * 10_000) for s in range(1, 6)]
    await store.commit(Batch(events=[*big, event("r1", 6), event("r1", 7)]))

    assert [e.seq for e in store.events("r1", max_bytes=1)] == [1]
    assert [e.seq for e in store.events("r1", max_bytes=15_000)] == [1, 2]
    assert [e.seq for e in store.events("r1", after_seq=4, max_bytes=5_000)] == [5]
    assert [e.seq for e in store.events("r1", after_seq=5, max_bytes=1)] == [6]
    assert [e.seq for e in store.events("r1", after_seq=5, max_bytes=1 << 20)] == [6, 7]
    assert [e.seq for e in store.events("r1", limit=3, max_bytes=1 << 20)] == [1, 2, 3]
    assert store.events("r1", after_seq=7, max_bytes=1) == []
    assert store.events("r1", max_bytes=1 << 20)[0] == big[0]


async def test_drop_events_keeps_that_seq_and_later(store: Store) -> None:
    """drop_events deletes one runtime's events below a seq (event retention), after the batch's puts."""
    await store.commit(Batch(events=[event("r1", s) for s in range(1, 6)] + [event("r10", 1)]))
    await store.commit(Batch(events=[event("r1", 6)], drop_events=[("r1", 4)]))

    assert [e.seq for e in store.events("r1")] == [4, 5, 6]
    assert store.last_seq("r1") == 6 and [e.seq for e in store.events("r10")] == [1]
    await store.commit(Batch(drop_events=[("r1", 1), ("r2", 9)]))  # nothing below 1; r2 has none
    assert [e.seq for e in store.events("r1")] == [4, 5, 6]
    await store.commit(Batch(drop_events=[("r1", 100)]))
    assert store.events("r1") == [] and [e.seq for e in store.events("r10")] == [1]


async def test_one_batch_carries_the_changes_of_several_runtimes(store: Store) -> None:
    """What the engine's committer writes for a group: records, transcripts, events and drops of
    several runtimes in one batch, each runtime's applied as if alone (purge, truncate, then puts)."""
    await store.commit(Batch(runtimes={"r1": {"v": 0}, "r2": {"v": 0}},
                             events=[event("r1", s) for s in (1, 2, 3)] + [event("r2", 1)],
                             messages=[(r, "root", i, {"content": f"{r}-{i}"})
                                       for r in ("r1", "r2") for i in range(3)]))
    await store.commit(Batch(purge=["r3"], runtimes={"r1": {"v": 1}, "r2": {"v": 1}, "r3": {"v": 1}},
                             truncate=[("r2", "root", 1)],
                             messages=[("r2", "root", 1, {"content": "r2-1b"})],
                             events=[event("r1", 4), event("r2", 2), event("r3", 1)],
                             drop_events=[("r1", 3)]))

    assert [store.get_runtime(r) for r in ("r1", "r2", "r3")] == [{"v": 1}] * 3
    assert [e.seq for e in store.events("r1")] == [3, 4] and [e.seq for e in store.events("r2")] == [1, 2]
    assert [e.seq for e in store.events("r3")] == [1]
    assert contents(store, "r1", "root") == ["r1-0", "r1-1", "r1-2"]
    assert contents(store, "r2", "root") == ["r2-0", "r2-1b"]


async def test_failed_commit_keeps_nothing(store: Store) -> None:
    """A batch with one unencodable record fails whole; the store stays readable and writable."""
    await store.commit(Batch(runtimes={"r1": {"v": 1}}))
    bad = Batch(runtimes={"r1": {"v": 2}}, handles={("r1", "root"): {}}, events=[event("r1", 1)],
                messages=[("r1", "root", 0, {"content": object()})])

    with pytest.raises(StoreError, match="messages/r1/root/0"):
        await store.commit(bad)

    assert store.get_runtime("r1") == {"v": 1}
    assert store.handles("r1") == [] and store.last_seq("r1") == 0
    await store.commit(Batch(runtimes={"r1": {"v": 3}}))
    assert store.get_runtime("r1") == {"v": 3}


@pytest.mark.parametrize("fields", [
    {"runtimes": {"": {}}},
    {"handles": {("r1", "a\x00b"): {}}},
    {"events": [event("r1", 0)]},
    {"messages": [("r1", "root", -1, {})]},
    {"truncate": [("r1", "x" * 300, 0)]},
], ids=["empty-id", "nul-in-id", "seq-0", "negative-index", "id-too-long"])
async def test_keys_the_layout_cannot_hold_are_refused(store: Store, fields: dict[str, Any]) -> None:
    """Ids and numbers outside the key rules raise StoreError and keep nothing of the batch."""
    with pytest.raises(StoreError, match="invalid"):
        await store.commit(Batch(checkpoints={("ok", "root"): {}}, **fields))
    assert store.get_checkpoint("ok", "root") is None


async def test_commits_apply_in_call_order(store: Store) -> None:
    """Concurrent commits land in the order they were called: the last put wins."""
    await asyncio.gather(*(store.commit(Batch(runtimes={"r1": {"v": i}})) for i in range(30)))
    assert store.get_runtime("r1") == {"v": 29}


async def test_info_reports_format_version(store: Store) -> None:
    await store.commit(Batch(runtimes={"r1": record()}))
    info = store.info()
    assert info.format_version == FORMAT_VERSION
    assert info.size_bytes > 0


async def test_closed_store_refuses_reads_and_commits(store: Store) -> None:
    store.close()
    with pytest.raises(StoreError, match="closed"):
        await store.commit(Batch(runtimes={"r1": {}}))
    with pytest.raises(StoreError, match="closed"):
        store.get_runtime("r1")
    store.close()


async def test_cancelled_caller_does_not_undo_a_started_commit(store: Store) -> None:
    """Once commit() has started, cancelling its caller still lands the batch (and nothing half)."""
    started = asyncio.create_task(store.commit(Batch(runtimes={"r1": {"v": 1}}, events=[event("r1", 1)])))
    await asyncio.sleep(0)  # let the task reach its first await, i.e. hand the batch over
    started.cancel()
    with pytest.raises(asyncio.CancelledError):
        await started

    await store.commit(Batch(runtimes={"r2": {}}))  # commits apply in order: this one waits for the first
    assert store.get_runtime("r1") == {"v": 1} and store.last_seq("r1") == 1


def handle_record(hid: str, state: str, **fields: object) -> JSON:
    return record(**{"id": hid, "state": state, "wake_queue": [], "escalating": False, **fields})


@pytest.mark.parametrize("leaf_path", [["root", "p", "c"], ["root", "root/p", "root/p/c"]],
                         ids=["id-segments", "full-ids-of-older-records"])
async def test_recovery_index_and_census_follow_every_handle_write(store: Store,
                                                                   leaf_path: list[str]) -> None:
    """Running, escalating and queue-holding handles are to recover; the census counts states (root
    excluded) and open suspensions of leaves only, with the oldest's time; purge empties both."""
    child_request = {"id": "q", "kind": "approval", "data": {"path": leaf_path}}
    await store.commit(Batch(handles={
        ("r1", "root"): handle_record("root", "idle"),
        ("r1", "root/a"): handle_record("root/a", "running"),
        ("r1", "root/p"): handle_record("root/p", "suspended", pending=child_request, suspended_at=30.0),
        ("r1", "root/p/c"): handle_record("root/p/c", "suspended", pending=child_request, suspended_at=20.0),
        ("r1", "root/e"): handle_record("root/e", "suspended", escalating=True,
                                        pending={"id": "e", "kind": "input"}, suspended_at=25.0),
        ("r1", "root/w"): handle_record("root/w", "idle", wake_queue=[["root/w/x", "go"]]),
        ("r1", "root/z"): handle_record("root/z", "suspended", pending={"id": "z", "kind": "approval"},
                                        suspended_at=10.0)}))

    assert store.handles_to_recover("r1") == ["root/a", "root/e", "root/w"]
    census = store.census("r1")
    assert census.states == {"running": 1, "suspended": 4, "idle": 1}
    assert census.open == {"approval": (2, 10.0), "input": (1, 25.0)}

    await store.commit(Batch(handles={("r1", "root/z"): handle_record("root/z", "running"),
                                      ("r1", "root/a"): None}))
    assert store.handles_to_recover("r1") == ["root/e", "root/w", "root/z"]
    census = store.census("r1")
    assert census.states == {"running": 1, "suspended": 3, "idle": 1}
    assert census.open == {"approval": (1, 20.0), "input": (1, 25.0)}

    await store.commit(Batch(purge=["r1"]))
    assert store.handles_to_recover("r1") == []
    assert store.census("r1").states == {} and store.census("r1").open == {}


async def test_the_recovery_index_of_a_large_runtime_is_complete(store: Store) -> None:
    """Every running handle of many is listed once, in key order; idle ones never."""
    handles = {("r1", f"root/h.{i:05d}"): handle_record(f"root/h.{i:05d}", "running" if i % 3 else "idle")
               for i in range(2500)}
    await store.commit(Batch(handles=handles))
    assert store.handles_to_recover("r1") == sorted(hid for (_, hid), rec in handles.items()
                                                    if rec["state"] == "running")
    assert store.census("r1").states == {"running": 1666, "idle": 834}


async def test_read_answers_what_the_reads_inside_it_return(store: Store) -> None:
    """``read`` runs its reads (several in one call) and answers what they return; a store error
    raised inside reaches the awaiting caller as itself."""
    await store.commit(Batch(runtimes={"r1": record(id="r1")}, events=[event("r1", 1)]))
    await store.commit(messages_batch("r1", "root", 3))
    both = await store.read(lambda s: (s.get_runtime("r1"), contents(s, "r1", "root", 1)))
    assert both == (record(id="r1"), ["m1", "m2"])
    assert await store.read(lambda s: s.last_seq("r1")) == 1

    def broken(s: Store) -> None:
        raise StoreError("refused inside read")

    with pytest.raises(StoreError, match="refused inside read"):
        await store.read(broken)


async def test_commits_of_one_lane_land_in_call_order_and_every_lane_lands(store: Store) -> None:
    """Commits of one lane apply in the order they were called; a lane past ``commit_lanes`` wraps."""
    lanes = store.commit_lanes
    assert lanes >= 1
    for lane in range(lanes + 1):
        await asyncio.gather(*(store.commit(Batch(runtimes={f"g{lane}": {"v": i}}), lane) for i in range(20)))
    assert [store.get_runtime(f"g{lane}") for lane in range(lanes + 1)] == [{"v": 19}] * (lanes + 1)


async def test_a_read_beside_commits_on_another_lane_sees_committed_state(store: Store) -> None:
    """Reads made through ``read`` while another lane keeps committing see every commit that
    returned before they started and only what was committed, never going back in time. (The
    reads inside one ``read`` are not one snapshot: each sees what was committed when it ran.)"""
    await store.commit(Batch(runtimes={"steady": {"v": 1}}), lane=0)
    committed = 0  # the highest v whose commit has returned
    done = False

    async def writer() -> None:
        nonlocal committed, done
        for v in range(1, 41):
            both = Batch(runtimes={"busy": {"v": v}}, handles={("busy", "root"): {"v": v}})
            await store.commit(both, lane=1)
            committed = v
        done = True

    def look(s: Store) -> tuple[JSON | None, JSON | None, JSON | None]:
        return s.get_runtime("steady"), s.get_runtime("busy"), s.get_handle("busy", "root")

    writing = asyncio.create_task(writer())
    seen: list[int] = []
    while not done:
        floor = committed
        steady, busy, root = await store.read(look)
        assert steady == {"v": 1}
        v = 0 if busy is None else int(busy["v"])
        w = 0 if root is None else int(root["v"])
        assert v >= floor and w >= floor, f"a read after commit {floor} returned saw {v} and {w}"
        assert v <= w <= 40, "the handle, read second, is at least as new as its runtime"
        seen.append(v)
        await asyncio.sleep(0)
    await writing
    assert seen == sorted(seen), "reads went back in time"
    assert await store.read(look) == ({"v": 1}, {"v": 40}, {"v": 40})


async def test_a_failing_read_raises_to_its_caller_and_leaves_the_store_usable(store: Store) -> None:
    """A read whose work raises after reads of its own raises that to its caller; more of them at
    once than the store has readers, beside good reads and commits, leave every reader, every lane
    and the store's state as they were."""
    await store.commit(Batch(runtimes={"r1": {"v": 1}}, events=[event("r1", 1)]))

    def fails_after_reading(s: Store) -> None:
        s.get_runtime("r1")
        s.events("r1")
        raise ValueError("the work failed after its reads")

    def reads_runtime(s: Store) -> JSON | None:
        return s.get_runtime("r1")

    failing = [store.read(fails_after_reading) for _ in range(12)]
    good = [store.read(reads_runtime) for _ in range(12)]
    lanes = range(store.commit_lanes)
    commits = [store.commit(Batch(runtimes={f"c{lane}": {"lane": lane}}), lane) for lane in lanes]
    results = await asyncio.gather(*failing, *good, *commits, return_exceptions=True)

    failures, answers = results[:12], results[12:24]
    assert all(isinstance(f, ValueError) and "after its reads" in str(f) for f in failures), failures
    assert answers == [{"v": 1}] * 12
    assert results[24:] == [None] * store.commit_lanes
    with pytest.raises(StoreError, match="refused half-way"):  # a store error, after a read, as itself
        await store.read(lambda s: s.get_runtime("r1") and _raise(StoreError("refused half-way")))
    assert await store.read(lambda s: (s.get_runtime("r1"), s.last_seq("r1"))) == ({"v": 1}, 1)
    await store.commit(Batch(runtimes={"r1": {"v": 2}}))
    assert await store.read(reads_runtime) == {"v": 2}
    assert [await store.read(lambda s, n=n: s.get_runtime(f"c{n}")) for n in range(store.commit_lanes)] == [
        {"lane": n} for n in range(store.commit_lanes)]


async def test_a_closed_store_refuses_reads_made_through_read(store: Store) -> None:
    await store.commit(Batch(runtimes={"r1": {}}))
    store.close()
    with pytest.raises(StoreError, match="closed"):
        await store.read(lambda s: s.get_runtime("r1"))


def _raise(error: Exception) -> None:
    raise error
