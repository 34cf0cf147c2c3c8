"""What the three reference scenarios share: the tool, the mock model, the registry and the checks.

The tool ``secret_action`` needs an authorization: without an answer it
suspends with an ``authorization`` request, once answered it performs the
action. The mock model is the reference's mock transport, served by this
process over the worker stream (llm style ``worker``): with no tool message in
the request it calls ``secret_action`` with ``{}`` (usage 3/2/5), otherwise it
answers with the first tool message's content (usage 2/1/3).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

from toolnexus_client import Context, Runtime, TaskResult, Tool, ToolResult, agent, registry

AGENT = "operator"
PROMPT = "please perform the secret action"


def secret_action(args: dict[str, Any], ctx: Context) -> ToolResult | str:
    """Suspend until authorized; the request id is stable per handle so a decline is recognised."""
    if ctx.answer is None:
        return ToolResult.suspend(id=f"secret-action:{ctx.handle}", kind="authorization", prompt="approve?")
    return "action performed"


def completion(message: dict[str, Any], usage: tuple[int, int, int]) -> dict[str, Any]:
    prompt, completion_tokens, total = usage
    return {"id": "mock", "object": "chat.completion", "created": int(time.time()), "model": "mock",
            "choices": [{"index": 0, "message": message,
                         "finish_reason": "tool_calls" if "tool_calls" in message else "stop"}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion_tokens, "total_tokens": total}}


def mock_transport(request: dict[str, Any]) -> dict[str, Any]:
    """The reference mock model, as a transport: ``{"body": request}`` → ``{"status", "headers", "body"}``."""
    messages = request["body"].get("messages") or []
    tool_messages = [m for m in messages if m.get("role") == "tool"]
    if tool_messages:
        answer = str(tool_messages[0].get("content") or "")
        body = completion({"role": "assistant", "content": answer}, (2, 1, 3))
    else:
        call = {"id": "call_1", "type": "function", "function": {"name": "secret_action", "arguments": "{}"}}
        body = completion({"role": "assistant", "content": None, "tool_calls": [call]}, (3, 2, 5))
    return {"status": 200, "headers": {"content-type": "application/json"}, "body": body}


def new_runtime(target: str) -> Runtime:
    """A runtime with one agent using ``secret_action``, the model served by ``mock_transport``."""
    tool = Tool("secret_action", "Performs the secret action; needs an authorization.",
                {"type": "object", "properties": {}}, execute=secret_action)
    reg = registry(agent(AGENT, does="performs actions that need authorization", uses={"tools": [tool]}))
    return Runtime.new(target=target, registry=reg, transport=mock_transport)


def suspend(rt: Runtime) -> tuple[str, TaskResult]:
    """Spawn the agent under root, wake it and wait for its (pending) result, in one call."""
    woken = rt.spawn(rt.root, AGENT, prompt=PROMPT, wait=30)
    # no result only when a daemon shutdown cut the wait short: the wake is durable, wait for it
    result = woken.result if woken.result is not None else rt.wait(woken.handle, timeout=30)
    return woken.handle, result


class Checks:
    """Prints each verified fact; remembers whether any failed."""

    def __init__(self, title: str) -> None:
        self.failed = 0
        print(title)

    def check(self, label: str, passed: bool, got: Any = None) -> bool:
        mark = "ok  " if passed else "FAIL"
        print(f"  {mark} {label}" + ("" if passed or got is None else f" (got {got!r})"))
        self.failed += 0 if passed else 1
        return passed

    @property
    def ok(self) -> bool:
        return self.failed == 0


def main(run: Callable[[str], bool]) -> int:
    """``python examples/<scenario>.py --target HOST:PORT`` against a running daemon."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--target", default="127.0.0.1:50051", help="the daemon (default %(default)s)")
    args = parser.parse_args()
    return 0 if run(args.target) else 1
