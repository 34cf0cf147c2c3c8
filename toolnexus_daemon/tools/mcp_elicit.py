"""An MCP elicitation as a durable suspension, and an Answer as the elicitation's result
(docs/mcp.md).

Form mode becomes a Request of kind ``input`` (``data: {mcp_server, tool, requested_schema}``),
URL mode one of kind ``authorization`` with the URL. The request id is derived from the call's
action id and what the server asks (message, and schema or mode), so the same question of the
same call has the same id after any restart: a re-invoked call whose server asks it again is
answered from the recorded answer instead of suspending again. The daemon may have renamed a
reused id (``<id>~<hex>``); that still names the same question.
"""

from __future__ import annotations

import hashlib
import json

from mcp_types import ElicitRequestFormParams, ElicitRequestParams, ElicitRequestURLParams, ElicitResult

from ..model import JSON, Answer, Request

INPUT = "input"
AUTHORIZATION = "authorization"
CANCELLED = "cancelled"


def request_id(action_id: str, params: ElicitRequestParams) -> str:
    """The id of the Request this elicitation of this call becomes: the same for the same question."""
    if isinstance(params, ElicitRequestURLParams):
        what = ["url", params.message]
    else:
        what = ["form", params.message, json.dumps(params.requested_schema, sort_keys=True)]
    digest = hashlib.sha256("\0".join([action_id, *what]).encode()).hexdigest()[:16]
    return f"mcp-{digest}"


def answers(answer: Answer | None, req_id: str) -> bool:
    """Whether ``answer`` was given to the request ``req_id`` (or the daemon's renaming of it)."""
    return answer is not None and (answer.id == req_id or answer.id.startswith(req_id + "~"))


def request(action_id: str, server: str, tool: str, params: ElicitRequestParams) -> Request:
    """The Request a person answers."""
    rid = request_id(action_id, params)
    data: JSON = {"mcp_server": server, "tool": tool}
    if isinstance(params, ElicitRequestURLParams):
        if params.elicitation_id:
            data["elicitation_id"] = params.elicitation_id
        return Request(rid, AUTHORIZATION, params.message, url=params.url, data=data)
    assert isinstance(params, ElicitRequestFormParams)
    data["requested_schema"] = dict(params.requested_schema)
    return Request(rid, INPUT, params.message, data=data)


def result(answer: Answer, params: ElicitRequestParams) -> ElicitResult:
    """``ok`` → accept (form mode: ``answer.data`` as content); a decline → decline, or cancel
    when its reason is ``cancelled``."""
    if not answer.ok:
        return ElicitResult(action="cancel" if answer.reason == CANCELLED else "decline")
    if isinstance(params, ElicitRequestURLParams):
        return ElicitResult(action="accept")
    content = answer.data if isinstance(answer.data, dict) else {}
    return ElicitResult(action="accept", content=content)
