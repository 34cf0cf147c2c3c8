"""Scenario (a): a tool suspends for an authorization, and resuming with ok=True finishes the task.

Run against a daemon: ``python examples/suspend_resume.py --target 127.0.0.1:50051``
(or ``make demo``, which starts one for you).
"""

from __future__ import annotations

from _scenario import Checks, main, new_runtime, suspend


def run(target: str) -> bool:
    checks = Checks("scenario (a): suspend on authorization, resume with ok=True")
    rt = new_runtime(target)
    try:
        handle, result = suspend(rt)
        pending = result.pending
        checks.check("wait returned status 'pending'", result.status == "pending", result.status)
        if not checks.check("the pending request has kind 'authorization'",
                            pending is not None and pending.kind == "authorization", pending):
            return False
        assert pending is not None
        snap = rt.snapshot(handle)
        checks.check(f"snapshot of {handle} is 'suspended'", snap.state == "suspended", snap.state)
        rt.resume({"id": pending.id, "ok": True})
        after = rt.snapshot(handle)
        text = after.last_result.text if after.last_result else None
        checks.check("after resume the handle is 'idle'", after.state == "idle", after.state)
        checks.check("last_result.text == 'action performed'", text == "action performed", text)
    finally:
        rt.shutdown()
    return checks.ok


if __name__ == "__main__":
    raise SystemExit(main(run))
