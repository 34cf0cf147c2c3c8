"""Which process a lease holder is, and when it is provably gone (``store/postgres/process_id.py``): only a
process of this host and pid namespace that no longer runs, or whose pid now names another process."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from toolnexus_daemon.store import process_id

pytestmark = pytest.mark.skipif(not process_id.this_process(), reason="needs Linux /proc")


def test_a_live_process_is_never_gone_and_an_ended_one_is() -> None:
    me = process_id.this_process()
    scope = process_id.scope_of(me)
    assert not process_id.gone_here(me)
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    assert process_id.gone_here(f"{scope}|{ended.pid}|1")
    assert process_id.gone_here(f"{scope}|{os.getppid()}|1"), "the pid names another process now"


def test_a_process_of_another_host_or_namespace_or_unknown_is_never_judged() -> None:
    assert not process_id.gone_here("")
    assert not process_id.gone_here("other-boot|pid:[1]|12345|1")
    assert not process_id.gone_here("garbage")
