"""The demo approval tool, served as a webhook by the dev model server.

It shows the suspension round trip end to end without an app: the first call
(no answer) suspends with an ``approval`` request; a call carrying an ``ok``
answer performs the action; a declined answer asks again, which the daemon
resolves as ``declined/expired: approve?`` (docs/protocol.md §4, Resume).
"""

from __future__ import annotations

import hashlib

from toolnexus_daemon.model import JSON
from toolnexus_daemon.tools.base import action_of

PROMPT = "approve?"
DONE = "action performed"


def approval_request_id(action_id: str) -> str:
    """A request id of its own for every action, stable across that call's re-invocations.

    Built from ``action_id`` (the call id without its attempt suffix), not from the handle: a
    handle performs many actions, and each must ask its own question. Re-invoked after a decline,
    the call repeats the *same* request, which the daemon resolves as declined.
    """
    digest = hashlib.sha1(action_id.encode()).hexdigest()
    return "approval-" + digest[:10]


def handle_approval(call: JSON) -> JSON:
    """Answer one webhook call ``{call_id, action_id, runtime_id, handle, tool, arguments, answer}``."""
    answer = call.get("answer")
    if isinstance(answer, dict) and answer.get("ok"):
        return {"output": DONE, "is_error": False}
    action = str(call.get("action_id") or action_of(str(call.get("call_id") or "")))
    return {"output": "", "is_error": False,
            "pending": {"id": approval_request_id(action), "kind": "approval", "prompt": PROMPT}}
