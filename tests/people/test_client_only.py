"""The commands for people load the Python client and nothing of the daemon but themselves: the
daemon's gRPC edge and generated stubs stay out, as for any remote caller (the import contract in
pyproject.toml says the same of the source; this checks what a run actually loads)."""

from __future__ import annotations

import subprocess
import sys

PROBE = ("import sys, toolnexus_daemon.people.commands; "
         "print(sorted(m for m in sys.modules if m.startswith('toolnexus_daemon.')"
         " and not m.startswith('toolnexus_daemon.people'))); "
         "print('toolnexus_client.daemon' in sys.modules)")


def test_the_commands_load_the_client_and_no_daemon_stubs() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60,
                         check=True)
    daemon_modules, client_loaded = out.stdout.splitlines()
    assert (daemon_modules, client_loaded) == ("[]", "True"), out.stdout
