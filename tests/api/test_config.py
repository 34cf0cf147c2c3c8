"""Settings from flags and TOOLNEXUS_* variables; the JSON log format."""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path

import pytest

from toolnexus_daemon.config import load, parse_size
from toolnexus_daemon.observe.logs import JsonFormatter


def test_defaults() -> None:
    s = load([], {})
    assert s.listen == ("127.0.0.1:50051",)
    assert (s.data_dir, s.sync, s.map_size, s.grace, s.log_level) == (Path("./var/toolnexus"), True, 1 << 30,
                                                                       5.0, "info")


def test_environment_then_flags_win() -> None:
    env = {"TOOLNEXUS_LISTEN": "127.0.0.1:1,unix:/tmp/x.sock", "TOOLNEXUS_NO_SYNC": "1",
           "TOOLNEXUS_MAP_SIZE": "64MiB", "TOOLNEXUS_GRACE": "1.5", "TOOLNEXUS_DATA_DIR": "/d"}
    s = load([], env)
    assert s.listen == ("127.0.0.1:1", "unix:/tmp/x.sock")
    assert (s.sync, s.map_size, s.grace, s.data_dir) == (False, 64 << 20, 1.5, Path("/d"))
    s = load(["--listen", "127.0.0.1:2", "--map-size", "2G", "--data-dir", "/e"], env)
    assert (s.listen, s.map_size, s.data_dir) == (("127.0.0.1:2",), 2 << 30, Path("/e"))


def test_bad_values_exit_2() -> None:
    with pytest.raises(SystemExit) as err:
        load(["--map-size", "lots"], {})
    assert err.value.code == 2
    with pytest.raises(SystemExit):
        load([], {"TOOLNEXUS_LOG_LEVEL": "chatty"})


def test_parse_size() -> None:
    assert [parse_size(t) for t in ("10", "1KiB", "1k", "3MB", "1GiB")] == [10, 1024, 1024, 3 << 20, 1 << 30]


def test_json_log_lines_carry_extras_but_not_secrets() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("test.logs")
    logger.addHandler(handler)
    try:
        logger.warning("hello %s", "world", extra={"runtime": "rt-1", "call_id": "c", "api_key": "sk-1",
                                                   "answer": {"ok": True}})
    finally:
        logger.removeHandler(handler)
    rec = json.loads(stream.getvalue())
    assert (rec["msg"], rec["level"]) == ("hello world", "warning")
    assert (rec["runtime"], rec["call_id"]) == ("rt-1", "c")
    assert rec["time"].endswith("Z")
    assert "api_key" not in rec and "answer" not in rec and "sk-1" not in stream.getvalue()
