"""Scenario (c): declining the authorization settles the task with the decline fed to the model.

Run against a daemon: ``python examples/decline.py --target 127.0.0.1:50051``.
"""

from __future__ import annotations

from _scenario import Checks, main, new_runtime, suspend

EXPECTED = "declined/expired: approve?"


def run(target: str) -> bool:
    checks = Checks("scenario (c): resume with ok=False declines")
    rt = new_runtime(target)
    try:
        handle, result = suspend(rt)
        if not checks.check("wait returned a pending request", result.pending is not None, result):
            return False
        assert result.pending is not None
        rt.resume({"id": result.pending.id, "ok": False, "reason": "not authorized"})
        after = rt.snapshot(handle)
        last = after.last_result
        checks.check("after the decline the handle is 'idle'", after.state == "idle", after.state)
        checks.check("last_result.is_error is false", last is not None and not last.is_error, last)
        checks.check(f"last_result.text == {EXPECTED!r}", last is not None and last.text == EXPECTED,
                     last.text if last else None)
    finally:
        rt.shutdown()
    return checks.ok


if __name__ == "__main__":
    raise SystemExit(main(run))
