"""What the commands print: ages, clipped cells, aligned tables, JSON with int64 as numbers."""

from __future__ import annotations

from datetime import UTC, datetime

from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_daemon.people import render

NOW = datetime(2026, 1, 2, 12, 0, 0, tzinfo=UTC)


def test_when_says_how_long_ago_or_ahead() -> None:
    assert render.when("2026-01-02T09:00:00Z", NOW) == "3h ago"
    assert render.when("2026-01-02T11:59:30.500Z", NOW) == "29s ago"
    assert render.when("2025-12-30T12:00:00+00:00", NOW) == "3d ago"
    assert render.when("2026-01-02T12:05:00Z", NOW) == "in 5m"
    assert (render.when("", NOW), render.when("yesterday", NOW)) == ("-", "yesterday")


def test_clip_keeps_one_line_of_bounded_width() -> None:
    assert render.clip("a\nb   c") == "a b c"
    assert render.clip("x" * 100, 10) == "x" * 9 + "…"


def test_table_aligns_columns_under_capital_headers() -> None:
    out = render.table(["id", "state"], [["root/a.1", "idle"], ["b", "suspended"]])
    assert out.splitlines() == ["ID        STATE", "root/a.1  idle", "b         suspended"]


def test_to_json_keeps_proto_names_numbers_structs_and_absent_messages() -> None:
    snap = pb.HandleSnapshot(id="h", usage_total=7, children=["c"])
    snap.pending.data.update({"n": 1, "tags": ["x"]})
    out = render.to_json(snap)
    assert (out["usage_total"], out["children"], out["last_result"]) == (7, ["c"], None)
    assert out["pending"]["data"] == {"n": 1, "tags": ["x"]}
    summary = render.to_json(pb.RuntimeSummary(runtime_id="r", handles={"idle": 2}))
    assert summary["handles"] == {"idle": 2}


def test_visible_shows_every_control_character() -> None:
    assert render.visible("a\x1b[2Jb") == "a\\e[2Jb"
    assert render.visible("\x07\x00\x1f\x7f") == "^G^@^_^?"
    assert render.visible("x\ry\nz\t") == "x\\ry\\nz\\t"
    assert render.visible("\x9b31m\x85") == "\\x9b31m\\x85"
    assert render.visible("l\u2028p\u2029\u202eo") == "l\\u2028p\\u2029\\u202eo"
    assert render.visible("héllo → ünïcode ✓") == "héllo → ünïcode ✓"
    assert render.visible_lines("one\x1b\ntwo\r") == "one\\e\ntwo\\r"


def test_clip_collapses_spaces_but_shows_controls() -> None:
    assert render.clip("a\n\tb\r c") == "a b\\r c"


def test_table_clips_the_free_text_column_to_fit_the_width() -> None:
    rows = [["req-1", "x" * 200], ["req-22", "short"]]
    lines = render.table(["id", "prompt"], rows, flex=1, width=40).splitlines()
    assert max(len(line) for line in lines) == 40 and lines[1].endswith("…")
    assert lines[2] == "req-22  short"
    wide_ids = render.table(["id", "prompt"], [["i" * 60, "text"]], flex=1, width=40).splitlines()
    assert wide_ids[1].startswith("i" * 60)  # ids are never clipped


def test_plural() -> None:
    assert (render.plural(1, "turn"), render.plural(0, "turn"), render.plural(2, "token")) == (
        "1 turn", "0 turns", "2 tokens")


def test_durations_for_older_than() -> None:
    from toolnexus_daemon.people.exitcodes import CliError
    from toolnexus_daemon.people.listing import duration_ms

    assert duration_ms("90s", "f") == 90_000 and duration_ms("1h30m", "f") == 5_400_000
    assert duration_ms("2d", "f") == 172_800_000 and duration_ms("250ms", "f") == 250
    for bad in ("", "5", "5x", "-5m", "m5", "5m garbage"):
        try:
            duration_ms(bad, "--older-than")
        except CliError as err:
            assert err.code == 2 and "--older-than" in err.message
        else:
            raise AssertionError(bad)


def test_the_clients_values_print_as_the_messages_they_came_from() -> None:
    """The commands hold the Python client's values: their JSON is the message's, key for key and
    in order (an inbox item's ``from``, a nested version, ``""`` for an absent string, a Struct's
    numbers as doubles), so scripts reading ``--json`` see no difference."""
    import json

    from toolnexus_client import _convert as convert
    from toolnexus_client import _daemon_calls as calls
    from toolnexus_client import _pending as pending
    from toolnexus_client._gen import runtime_pb2 as cpb

    request = cpb.Request(id="r", kind="approval", prompt="ok?")
    request.data.update({"n": 1, "nested": {"k": [2, "x"]}})
    snap = cpb.HandleSnapshot(id="root/a.1", agent="a", state="suspended", parent="root", children=["c"],
                              usage_total=7, pending=request, inbox=[cpb.InboxItem(channel="chat", text="t")],
                              definition_changed=[cpb.DefinitionChange(part="tool", name="x", change="schema",
                                                                       added=["p"], summary="s")],
                              usage=cpb.Usage(total_tokens=7), version=2)
    setattr(snap.inbox[0], "from", "ops")
    snap.last_result.CopyFrom(cpb.TaskResult(status="pending", pending=request, turns=1))
    event = cpb.Event(seq=4, runtime_id="rt", handle="root/a.1", type="pending", pending=request, at="t")
    event.data.update({"latency_ms": 52})
    item = cpb.PendingItem(request=request, runtime_id="rt", handle="root/a.1", created_at="t", version=1)
    use = cpb.VersionUse(version=cpb.RegistryVersion(number=1, digest="d", created_at="t"), handles=2,
                         latest=True)
    made = cpb.NewResponse(runtime_id="rt", root="root", version=cpb.RegistryVersion(number=1, digest="d"))
    summary = cpb.RuntimeSummary(runtime_id="rt", handles={"idle": 2}, versions_without_worker=[1])
    pairs = [(snap, convert.snapshot_from_pb(snap)), (event, convert.event_from_pb(event)),
             (item, pending.item_from_pb(item)), (use, convert.version_use_from_pb(use)),
             (made, calls.created_from_pb(made)), (summary, pending.summary_from_pb(summary))]
    for message, value in pairs:
        assert render.dumps(render.to_json(value)) == render.dumps(render.to_json(message)), type(value)
        assert json.loads(render.dumps(render.to_json(value)))  # and it is JSON
