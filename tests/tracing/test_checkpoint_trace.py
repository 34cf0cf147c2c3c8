"""The trace context kept in a checkpoint (written only when there is one, read from older
records), and the trace flags."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolnexus_daemon.config import load
from toolnexus_daemon.engine.state.checkpoint import Checkpoint

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


def test_info_shows_the_endpoint_without_its_password(tmp_path: Path) -> None:
    endpoint = "https://tn:s3cret@otel.example:4318"
    settings = load(["--data-dir", str(tmp_path), "--otlp-endpoint", endpoint], {})
    assert settings.tracing.endpoint == endpoint
    assert settings.redacted()["otlp-endpoint"] == "https://tn:***@otel.example:4318"


def test_a_bad_endpoint_is_refused_at_start(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        load(["--data-dir", str(tmp_path), "--otlp-endpoint", "otel.example:4318"], {})
    assert exited.value.code == 2
    assert "--otlp-endpoint 'otel.example:4318': want an http(s) URL" in capsys.readouterr().err
