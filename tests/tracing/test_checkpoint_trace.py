"""The trace context kept in a checkpoint: written only when there is one, read from older records."""

from __future__ import annotations

from toolnexus_daemon.engine.checkpoint import Checkpoint

PARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
SPAN = "00-4bf92f3577b34da6a3ce929d0e0e4736-b7ad6b7169203331-01"


def test_a_checkpoint_keeps_its_trace_context() -> None:
    cp = Checkpoint(input="go", turn_start=0, trace_parent=PARENT, trace_span=SPAN)
    back = Checkpoint.from_json(cp.to_json())
    assert (back.trace_parent, back.trace_span) == (PARENT, SPAN)


def test_no_trace_writes_nothing_and_an_older_record_reads() -> None:
    record = Checkpoint(input="go", turn_start=0, tag="").to_json()
    assert "trace" not in record  # a record without tracing is what it was before
    back = Checkpoint.from_json(record)
    assert (back.trace_parent, back.trace_span) == ("", "")
    assert Checkpoint.from_json({**record, "trace": None}).trace_span == ""
