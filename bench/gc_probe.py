"""How long a full garbage collection holds the daemon's event loop, with and without ``gctune``.

A fresh interpreter imports what the daemon imports (``toolnexus_daemon.app``: gRPC, the
generated protobuf modules, psycopg, httpx, lmdb…), builds one shared TLS context as a
start-up does, then holds a working set like a busy daemon's (``--records`` JSON records of
transcripts and handles, made after start-up), and times ``gc.collect()`` (a full collection)
``--reps`` times: first as CPython leaves it, then after ``gctune.freeze()`` at the end of
start-up (the working set is built after the freeze, as a daemon's is)::

    .venv/bin/python -m bench.gc_probe --records 20000 --reps 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

CHILD = r"""
import gc, json, sys, time
import toolnexus_daemon.app  # noqa: F401  (everything a daemon imports)
from toolnexus_daemon import gctune
from toolnexus_daemon.llm.http_base import shared_ssl_context
tuned, records, reps = sys.argv[1] == "1", int(sys.argv[2]), int(sys.argv[3])
shared_ssl_context()
if tuned:
    gctune.tune()
    gctune.freeze()
held = [{"role": "assistant", "content": f"message {i}", "tool_calls": [{"id": f"c{i}", "args": {"n": i}}]}
        for i in range(records)]
startup = len(gc.get_objects())
pauses = []
for _ in range(reps):
    t = time.perf_counter()
    gc.collect()
    pauses.append((time.perf_counter() - t) * 1000)
print(json.dumps({"tracked": startup, "frozen": gc.get_freeze_count(), "pauses_ms": pauses}))
"""


def _run(tuned: bool, records: int, reps: int) -> dict[str, object]:
    out = subprocess.run([sys.executable, "-c", CHILD, "1" if tuned else "0", str(records), str(reps)],
                         check=True, capture_output=True, text=True, timeout=300)
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    for tuned in (False, True):
        fig = _run(tuned, args.records, args.reps)
        pauses = [float(p) for p in fig["pauses_ms"]]  # type: ignore[union-attr]
        print(json.dumps({"tuned": tuned, "tracked_objects": fig["tracked"], "frozen": fig["frozen"],
                          "full_collection_ms_median": round(statistics.median(pauses), 2),
                          "max_ms": round(max(pauses), 2)}))


if __name__ == "__main__":
    main()
