"""A tool-using agent suspends and resumes through an unmodified llama-cpp-python server.

The model is forced to call ``secret_action`` (``tool_choice`` in the agent's request params), so
the run is deterministic even with a 135M model: the first call suspends on an approval, the
answer re-invokes the tool, and the model call after that tool result is the one that real
servers refused when the daemon sent ``"content": null`` beside ``tool_calls``. With the choice
still forced, that call asks for the tool again, so the turn parks on a second, fresh request.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.daemon import DaemonProcess
from toolnexus_client import Context, Runtime, Tool, ToolResult, agent, registry

FORCED = {"tool_choice": {"type": "function", "function": {"name": "secret_action"}}, "max_tokens": 48,
          "temperature": 0}


def _runtime(daemon: DaemonProcess, base_url: str, stream: bool, answers: list[Any]) -> Runtime:
    def secret_action(args: dict[str, Any], ctx: Context) -> ToolResult | str:
        if ctx.answer is None:
            return ToolResult.suspend(kind="authorization", prompt="approve?", id=f"secret:{ctx.handle}")
        answers.append(ctx.answer)
        return "action performed"

    tool = Tool("secret_action", "Performs the secret action; needs an authorization.",
                {"type": "object", "properties": {}}, execute=secret_action)
    reg = registry(agent("operator", does="performs actions that need authorization",
                         uses={"tools": [tool]}, request_params=FORCED))
    llm = {"style": "openai", "base_url": base_url, "model": "smollm2", "stream": stream,
           "timeout_ms": 120_000}
    return Runtime.new(target=daemon.target, registry=reg, llm=llm)


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_tool_suspend_resume_through_llama_cpp(daemon: DaemonProcess, llama_server: str,
                                               stream: bool) -> None:
    """The model call after a tool result succeeds on a real server, streamed and not."""
    answers: list[Any] = []
    rt = _runtime(daemon, llama_server, stream, answers)
    try:
        handle = rt.spawn(rt.root, "operator")
        rt.wake(handle, "please perform the secret action")
        first = rt.wait(handle, timeout=180)
        assert first.status == "pending", (first, daemon.logs()[-2000:])
        assert first.pending is not None and first.pending.kind == "authorization"

        rt.resume({"id": first.pending.id, "ok": True})
        second = rt.wait(handle, timeout=180)
        assert len(answers) == 1 and answers[0].ok
        # the model was asked again after the tool result and answered: no turn error
        assert second.status in ("pending", "done"), (second, daemon.logs()[-2000:])
        assert not second.is_error
        if second.status == "pending":
            assert second.pending is not None and second.pending.id != first.pending.id
        snap = rt.snapshot(handle)
        assert snap.usage_total > 0  # the server's usage, or an estimate when a stream sends none
    finally:
        rt.shutdown()
