"""The demo approval tool, served as a webhook by the dev model server.

It shows the suspension round trip end to end without an app: the first call
(no answer) suspends with an ``approval`` request; a call carrying an ``ok``
answer performs the action; a declined answer asks again, which the daemon
resolves as ``declined/expired: approve?`` (DESIGN §4, Resume).
"""

from __future__ import annotations

import hashlib

from ..model import JSON

PROMPT = "approve?"
DONE = "action performed"


def approval_request_id(runtime_id: str, handle: str) -> str:
    """A request id stable for one handle of one runtime.

    Not derived from ``call_id``: on resume the daemon re-invokes the tool
    with a new call id, and a declined re-invocation must repeat the *same*
    request for the daemon to recognise it as declined.
    """
    digest = hashlib.sha1((runtime_id + handle).encode()).hexdigest()
    return "approval-" + digest[:10]


def handle_approval(call: JSON) -> JSON:
    """Answer one webhook call ``{call_id, runtime_id, handle, tool, arguments, answer}``."""
    answer = call.get("answer")
    if isinstance(answer, dict) and answer.get("ok"):
        return {"output": DONE, "is_error": False}
    request_id = approval_request_id(str(call.get("runtime_id") or ""), str(call.get("handle") or ""))
    return {"output": "", "is_error": False,
            "pending": {"id": request_id, "kind": "approval", "prompt": PROMPT}}
