"""Scenario (b): resuming continues the task, so usage and turns keep growing across the suspension.

Run against a daemon: ``python examples/usage_grows.py --target 127.0.0.1:50051``.
"""

from __future__ import annotations

from _scenario import Checks, main, new_runtime, suspend


def run(target: str) -> bool:
    checks = Checks("scenario (b): usage and turns grow across the resume")
    rt = new_runtime(target)
    try:
        handle, result = suspend(rt)
        if not checks.check("wait returned a pending request", result.pending is not None, result):
            return False
        assert result.pending is not None
        before = rt.snapshot(handle)
        rt.resume({"id": result.pending.id, "ok": True})
        after = rt.snapshot(handle)
        checks.check(f"usage_total after the resume ({after.usage_total}) > before it ({before.usage_total})",
                     after.usage_total > before.usage_total)
        checks.check(f"turns_total ({after.turns_total}) >= 2", after.turns_total >= 2)
    finally:
        rt.shutdown()
    return checks.ok


if __name__ == "__main__":
    raise SystemExit(main(run))
