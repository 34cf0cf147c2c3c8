"""What the engine's held records (``engine/state/held.py``) cost in the process's memory.

    .venv/bin/python -m bench.held_memory                      # 16 MiB bound, 40 B / 400 B / 4 KB messages
    .venv/bin/python -m bench.held_memory --budget-mib 4 --sizes 100 1000

``--held-memory`` bounds what the daemon holds of its own commits in bytes *as encoded* (orjson,
as the store writes them), not in Python objects. This fills one ``HeldBudget`` through the
committer's own entry point (``HeldRecords.committed``) from ``--runtimes`` runtimes of
``--handles`` handles, each a transcript of ``--messages`` messages (user, assistant with a tool
call, tool result, in turn, of about ``--sizes`` bytes of text), and measures with ``tracemalloc``
what the held records keep allocated, against what the budget counts. In process, no daemon: the
figure is the records' own, with nothing else of the daemon in it. Every loop is bounded by its
counts.
"""

from __future__ import annotations

import argparse
import gc
import json
import tracemalloc
from pathlib import Path
from typing import Any

from toolnexus_daemon.engine.state.held import HeldBudget, HeldRecords
from toolnexus_daemon.store.base import Batch


def _transcript(messages: int, size: int, serial: int) -> list[dict[str, Any]]:
    """Messages as a turn writes them: fresh objects, text of about ``size`` bytes each."""
    out: list[dict[str, Any]] = []
    for i in range(messages):
        text = f"{serial}.{i} " + "x" * size
        if i % 3 == 0:
            out.append({"role": "user", "content": text})
        elif i % 3 == 1:
            call = {"id": f"call_{serial}_{i}", "type": "function",
                    "function": {"name": "lookup", "arguments": json.dumps({"q": text[: size // 4]})}}
            out.append({"role": "assistant", "content": "", "tool_calls": [call]})
        else:
            out.append({"role": "tool", "tool_call_id": f"call_{serial}_{i}", "content": text})
    return out


def measure(budget: int, size: int, runtimes: int, handles: int, messages: int) -> dict[str, float]:
    gc.collect()
    tracemalloc.start()
    bound = HeldBudget(budget)
    held = [HeldRecords(f"rt{r}", bound) for r in range(runtimes)]
    serial = 0
    for r, records in enumerate(held):
        for h in range(handles):
            serial += 1
            batch = Batch(messages=[(f"rt{r}", f"root/a.{h}", i, m)
                                    for i, m in enumerate(_transcript(messages, size, serial))])
            records.committed(batch)
    gc.collect()
    allocated, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {"message_bytes": size, "counted_mib": bound.total / 2**20, "allocated_mib": allocated / 2**20,
            "allocated_per_counted": allocated / bound.total if bound.total else 0.0,
            "at_bound": bound.total > budget * 0.9}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--budget-mib", type=float, default=16.0, help="the bound (--held-memory), MiB")
    parser.add_argument("--sizes", type=int, nargs="+", default=[40, 400, 4000],
                        help="text bytes per message")
    parser.add_argument("--runtimes", type=int, default=200)
    parser.add_argument("--handles", type=int, default=20, help="handles per runtime")
    parser.add_argument("--messages", type=int, default=12, help="messages per transcript")
    parser.add_argument("--out", type=Path, default=None, help="also write the figures here (JSON)")
    args = parser.parse_args()
    budget = int(args.budget_mib * 2**20)
    rows = [measure(budget, size, args.runtimes, args.handles, args.messages) for size in args.sizes]
    text = json.dumps({"budget_mib": args.budget_mib, "runtimes": args.runtimes, "handles": args.handles,
                       "messages": args.messages, "rows": rows}, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
