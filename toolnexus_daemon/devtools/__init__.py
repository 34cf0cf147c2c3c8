"""Development and test helpers shipped with the daemon.

A scripted OpenAI-compatible HTTP server (``toolnexus-daemon dev-model``)
and the demo approval webhook it serves. Tests use the same server, so what
a developer runs by hand is what the test suite exercises.
"""

from .approval_tool import approval_request_id, handle_approval
from .model_server import (
    Received,
    Reply,
    ScriptedModelServer,
    chat_response,
    mock_model,
    run_dev_model,
    serve_forever,
    tool_call,
)

__all__ = [
    "Received", "Reply", "ScriptedModelServer", "approval_request_id", "chat_response",
    "handle_approval", "mock_model", "run_dev_model", "serve_forever", "tool_call",
]
