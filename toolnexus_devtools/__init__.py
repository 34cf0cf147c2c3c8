"""Development and test helpers beside the daemon (not part of its runtime package).

A scripted OpenAI- and Anthropic-compatible HTTP server (``toolnexus-daemon
dev-model``), streamed replies for it, and the demo approval webhook it
serves. Tests use the same server, so what a developer runs by hand is what
the test suite exercises.
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
from .model_streams import (
    Stream,
    anthropic_response,
    chat_stream,
    messages_stream,
    mock_anthropic_model,
    tool_use,
)

__all__ = [
    "Received", "Reply", "ScriptedModelServer", "Stream", "anthropic_response", "approval_request_id",
    "chat_response", "chat_stream", "handle_approval", "messages_stream", "mock_anthropic_model",
    "mock_model", "run_dev_model", "serve_forever", "tool_call", "tool_use",
]
