"""``make demo``: start a daemon on a temporary data dir, run the three scenarios, stop it.

The daemon is ``python -m toolnexus_daemon serve --listen 127.0.0.1:0`` (port 0:
the OS picks a free one); it logs a JSON line ``{"msg": "serving",
"addresses": [...]}`` on stderr once it serves, which is how we learn where
to connect. It is stopped with SIGTERM and must exit 0. The exit status is
non-zero if any check of any scenario failed. With ``--target HOST:PORT`` the
scenarios run against a daemon you already started instead.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable

import decline
import suspend_resume
import usage_grows

SCENARIOS: list[Callable[[str], bool]] = [suspend_resume.run, usage_grows.run, decline.run]
START_TIMEOUT = 30.0


class Daemon:
    """The daemon subprocess; its stderr is drained on a thread so it never blocks on a full pipe."""

    def __init__(self, data_dir: str) -> None:
        cmd = [sys.executable, "-m", "toolnexus_daemon", "serve", "--listen", "127.0.0.1:0",
               "--data-dir", data_dir]
        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
        self.lines: list[str] = []
        self.addresses: list[str] = []
        self.serving = threading.Event()
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and record.get("msg") == "serving":
                self.addresses = list(record.get("addresses") or [])
                self.serving.set()
        self.serving.set()  # stderr closed: the daemon exited; wait_serving reports it

    def wait_serving(self) -> str:
        if not self.serving.wait(START_TIMEOUT) or not self.addresses:
            self.stop()
            tail = "\n".join(self.lines[-20:])
            raise SystemExit(f"the daemon did not start serving (exit {self.proc.poll()}):\n{tail}")
        return self.addresses[0]

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        return self.proc.returncode


def run_all(target: str) -> int:
    """Run every scenario; the number that failed (one crashing counts as failed)."""
    failed = 0
    for scenario in SCENARIOS:
        try:
            passed = scenario(target)
        except Exception as exc:
            print(f"  FAIL {scenario.__module__} raised {type(exc).__name__}: {exc}")
            passed = False
        failed += 0 if passed else 1
        print()
    return failed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", help="use a running daemon instead of starting one")
    args = parser.parse_args()
    if args.target:
        return 1 if run_all(args.target) else 0
    with tempfile.TemporaryDirectory(prefix="toolnexus-demo-") as data_dir:
        daemon = Daemon(data_dir)
        target = daemon.wait_serving()
        print(f"daemon serving on {target} (data dir {data_dir})\n")
        try:
            failed = run_all(target)
        finally:
            code = daemon.stop()
    print(f"daemon stopped with SIGTERM, exit code {code}")
    if code != 0:
        failed += 1
    print("all scenarios passed" if failed == 0 else f"{failed} failure(s)")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
