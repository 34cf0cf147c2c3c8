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
