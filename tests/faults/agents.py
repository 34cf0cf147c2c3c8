"""The agents of the chaos runs and the scripted model that drives them, by looking at each request.

Every model request names its agent by the system message (the soul) and its
turn by the last user message (the wake prompt, which is the cycle's tag), so
the script needs no state: the number of assistant messages after that user
message is the step. Replies are unique per (agent, tag, step) — arguments
and texts carry the tag — so a transcript that held a message twice would
show it. The script also logs every request as (handle key, call number,
when): the handle key is the agent and the first user message of the
history (a lane's first tag, or a child's only one), the call number counts
the assistant messages before it plus one — so the checks can tell a model
call re-issued because it was in flight at a kill from one whose reply had
been committed (paid twice). The time, not a generation counter, places a
request: a loaded server may get to a dead daemon's last request only after
the kill, but never after the next daemon was launched.

  worker       two ``record`` calls in parallel, then one more, then done
  approver     ``record`` and ``approve`` in parallel (approve suspends), then done
  coordinator  ``task`` asker with its own tag (the asker suspends, so it does), then done
  asker        like approver, one level down
  payer        ``record`` and ``charge`` in parallel, then done; ``charge`` is ``on_crash="ask"``: a
               call in flight at a kill comes back as a ``reconcile`` request, never re-sent
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

from toolnexus_client import Registry, Tool, agent, registry
from toolnexus_devtools.model_server import chat_response, tool_call

SOUL_PREFIX = "chaos agent "
USAGE = (3, 2, 5)
TOP_LEVEL = ("worker", "approver", "coordinator", "payer")
# tools whose calls must never run twice unasked (docs/protocol.md §11)
ASK_TOOLS = ("charge",)
RECORD_SCHEMA = {"type": "object", "properties": {"tag": {"type": "string"}, "step": {"type": "integer"},
                                                  "i": {"type": "integer"}}}
APPROVE_SCHEMA = {"type": "object", "properties": {"tag": {"type": "string"}}}


def chaos_registry() -> Registry:
    """The registry every chaos runtime uses; its native tools are served by ``ChaosWorker``."""
    record = Tool("record", "appends to the ledger", RECORD_SCHEMA)
    approve = Tool("approve", "asks for an approval", APPROVE_SCHEMA)
    charge = Tool("charge", "charges a card: must not run twice", APPROVE_SCHEMA, on_crash="ask")
    return registry(
        agent("worker", does="records", soul=SOUL_PREFIX + "worker", uses={"tools": [record]}),
        agent("approver", does="records after approval", soul=SOUL_PREFIX + "approver",
              uses={"tools": [record, approve]}),
        agent("asker", does="asks for approval", soul=SOUL_PREFIX + "asker",
              uses={"tools": [record, approve]}),
        agent("coordinator", does="delegates", soul=SOUL_PREFIX + "coordinator", team=["asker"]),
        agent("payer", does="charges once", soul=SOUL_PREFIX + "payer", uses={"tools": [record, charge]}),
    )


def request_id(handle: str, tag: str) -> str:
    """The id ``approve`` suspends on: unique per handle and cycle, stable across re-invocations."""
    return f"ap:{handle}:{tag}"


@dataclass(frozen=True)
class Ask:
    handle_key: str  # "<agent> <first user message of the handle's history>"
    number: int  # which model call of the handle this is (1 = its first ever)
    at: float  # time.monotonic() when the script saw it


class ChaosModel:
    """The script for ``ScriptedModelServer(script=...)``; thread-safe (the server is threaded)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.asks: list[Ask] = []

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        messages = body.get("messages") or []
        name = _agent_of(messages)
        users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
        tag = str(messages[users[-1]].get("content"))
        after = messages[users[-1] + 1:]
        step = sum(1 for m in after if m.get("role") == "assistant")
        number = sum(1 for m in messages if m.get("role") == "assistant") + 1
        with self._lock:
            key = f"{name} {messages[users[0]].get('content')}"
            self.asks.append(Ask(key, number, time.monotonic()))
        outputs = [str(m.get("content")) for m in after if m.get("role") == "tool"]
        return _reply(name, tag, step, outputs)

    def reissued(self) -> int:
        """Model requests beyond the first for the same call of the same handle."""
        with self._lock:
            counts = Counter((a.handle_key, a.number) for a in self.asks)
        return sum(n - 1 for n in counts.values())


def _agent_of(messages: list[dict[str, Any]]) -> str:
    first = messages[0] if messages else {}
    soul = str(first.get("content") or "") if first.get("role") == "system" else ""
    if not soul.startswith(SOUL_PREFIX):
        raise ValueError(f"not a chaos agent: {soul[:60]!r}")
    return soul[len(SOUL_PREFIX):]


def _record(tag: str, step: int, i: int) -> dict[str, Any]:
    return tool_call("record", {"tag": tag, "step": step, "i": i}, id=f"call_{step}_{i}")


def _reply(name: str, tag: str, step: int, outputs: list[str]) -> dict[str, Any]:
    final = f"{name} {tag} done: " + " | ".join(outputs[-2:])
    if name == "worker":
        if step == 0:
            return chat_response(tool_calls=[_record(tag, 0, 0), _record(tag, 0, 1)], usage=USAGE)
        if step == 1:
            return chat_response(tool_calls=[_record(tag, 1, 0)], usage=USAGE)
    elif name in ("approver", "asker"):
        if step == 0:
            approve = tool_call("approve", {"tag": tag}, id="call_0_1")
            return chat_response(tool_calls=[_record(tag, 0, 0), approve], usage=USAGE)
    elif name == "payer":
        if step == 0:
            # the model's call id carries the tag: "not completed: charge" (a declined reconcile) is
            # the same text in every cycle, and the transcript check wants every message unique
            charge = tool_call("charge", {"tag": tag}, id=f"call_0_1_{tag}")
            return chat_response(tool_calls=[_record(tag, 0, 0), charge], usage=USAGE)
    elif name == "coordinator":
        if step == 0:
            task = tool_call("task", {"agent": "asker", "prompt": tag}, id="call_0_0")
            return chat_response(tool_calls=[task], usage=USAGE)
    else:
        raise ValueError(f"unknown chaos agent {name!r}")
    return chat_response(content=final, usage=USAGE)


def tool_calls_of(message: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """(model id, name, arguments) of each tool call of an assistant message."""
    out = []
    for tc in message.get("tool_calls") or []:
        fn = tc.get("function") or {}
        out.append((str(tc.get("id")), str(fn.get("name")), json.loads(fn.get("arguments") or "{}")))
    return out
