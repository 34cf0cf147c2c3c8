"""A damaged or full store is refused with a message, never a silent crash.

A real daemon on a real LMDB directory: a data file truncated to half (SIGBUS before), an empty
one (silently an empty store before), and a store on a small tmpfs that fills up (INTERNAL
``Input/output error`` before).
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from tests.support.daemon import DaemonProcess
from tests.support.grpc_client import open_stub, openai_llm
from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_devtools import ScriptedModelServer

pytestmark = pytest.mark.lmdb_only  # damages, fills or locks LMDB files on purpose

TALKER = pb.AgentDef(name="talker", does="talks")


def filled_store(data_dir: Path) -> None:
    """A store with a runtime and a few handles, cleanly stopped."""
    with DaemonProcess(data_dir) as proc, ScriptedModelServer() as model:
        channel, stub = open_stub(proc.target)
        with channel:
            rid = stub.New(pb.NewRequest(agents=[TALKER], llm=openai_llm(model.url)), timeout=10).runtime_id
            for _ in range(50):
                stub.Spawn(pb.SpawnRequest(runtime_id=rid, agent="talker"), timeout=10)


def refused_start(data_dir: Path) -> DaemonProcess:
    proc = DaemonProcess(data_dir)
    with pytest.raises(RuntimeError, match="daemon exited"):
        proc.start()
    assert proc.proc is not None
    assert proc.proc.returncode == 1, proc.proc.returncode  # not -SIGBUS
    assert proc.proc.returncode != -signal.SIGBUS
    return proc


def test_a_truncated_data_file_is_refused_naming_it(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    filled_store(data_dir)
    data = data_dir / "data.mdb"
    os.truncate(data, data.stat().st_size // 2)
    proc = refused_start(data_dir)
    assert proc.has_logged(str(data)) and "truncated" in proc.logs() and "backup" in proc.logs()


def test_an_empty_data_file_is_refused_not_started_as_an_empty_store(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    filled_store(data_dir)
    os.truncate(data_dir / "data.mdb", 0)
    proc = refused_start(data_dir)
    assert proc.has_logged("is empty (0 bytes)") and "move the data directory aside" in proc.logs()


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_disk_is_resource_exhausted_naming_it_and_reads_go_on(small_disk: Path) -> None:
    data_dir = small_disk / "data"
    with DaemonProcess(data_dir, "--map-size", "64MiB") as proc, ScriptedModelServer() as model:
        channel, stub = open_stub(proc.target)
        with channel:
            rid = stub.New(pb.NewRequest(agents=[TALKER], llm=openai_llm(model.url)), timeout=10).runtime_id
            handle = stub.Spawn(pb.SpawnRequest(runtime_id=rid, agent="talker"), timeout=10).handle
            item = pb.InboxItem(text="x" * 400_000, channel="bulk")
            refusal: grpc.RpcError | None = None
            for _ in range(20):  # 8 MB into a 3 MB disk: it fills long before the loop ends
                try:
                    stub.Post(pb.PostRequest(runtime_id=rid, handle=handle, item=item), timeout=10)
                except grpc.RpcError as err:
                    refusal = err
                    break
            assert refusal is not None, "the disk never filled"
            code, details = refusal.code(), refusal.details() or ""
            assert code is grpc.StatusCode.RESOURCE_EXHAUSTED, (code, details)
            assert "disk holding" in details and str(data_dir) in details and "full" in details
            snap = stub.Snapshot(pb.SnapshotRequest(runtime_id=rid, handle=handle), timeout=10)
            assert snap.state == "idle"
            assert stub.Info(pb.InfoRequest(), timeout=10).version
