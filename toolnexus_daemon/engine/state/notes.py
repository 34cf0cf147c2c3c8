"""The trace lines of docs/protocol.md §2, one function per pinned format (arrows are U+2192)."""

from __future__ import annotations


def _b(ok: bool) -> str:
    return "true" if ok else "false"


def spawned(h: str, depth: int, tokens: int) -> str:
    return f"{h}: spawned (depth {depth}, tokens {tokens if tokens else 'inf'})"


def woke(h: str) -> str:
    return f"{h}: idle→running (wake)"


def done(h: str, turns: int, tokens: int) -> str:
    return f"{h}: running→idle (done, turns={turns}, tokens={tokens})"


def incomplete(h: str, max_turns: int) -> str:
    return f"{h}: running→idle (INCOMPLETE at maxTurns {max_turns})"


def errored(h: str, msg: str) -> str:
    return f"{h}: running→idle (error: {msg})"


def suspended_durable(h: str, kind: str) -> str:
    return f'{h}: running→suspended DURABLE (pending "{kind}", path preserved)'


def resume_at_checkpoint(h: str, ok: bool, turns: int) -> str:
    return f"{h}: resume with Answer(ok={_b(ok)}) at checkpoint (turns so far: {turns})"


def answer_accepted(h: str) -> str:
    return f"{h}: suspended→idle (Answer accepted, checkpoint restored)"


def closed(h: str, prior: str, reason: str) -> str:
    return f"{h}: {prior}→closed ({reason})"


def interrupted(h: str) -> str:
    return f"{h}: running→idle (interrupted; inbox intact)"


def pending_cancelled(h: str, kind: str) -> str:
    return f'{h}: suspended→idle (interrupt cancelled pending "{kind}")'


def tool_call(h: str, tool: str, call_id: str) -> str:
    return f"{h}: tool {tool} called ({call_id})"


def tool_result(h: str, tool: str, outcome: str) -> str:
    return f"{h}: tool {tool} → {outcome}"


def model_call(h: str, turn: int, tokens: int) -> str:
    return f"{h}: model call {turn} (tokens={tokens})"


def suspended_running(h: str, ok: bool) -> str:
    return f"{h}: suspended→running (Answer ok={_b(ok)})"


def cascade(h: str) -> str:
    return f"{h}: cascade resume (replay reattaches by task key)"


def reattach(p: str, child: str, state: str) -> str:
    return f"{p}: task replay → REATTACH to {child} (state {state})"


def pending_inline(h: str, kind: str, prompt: str) -> str:
    return f'{h}: running→suspended (pending "{kind}": {prompt})'


def escalate(h: str, who: str) -> str:
    return f'{h}: escalate → {who} answers ("nearest interpreter")'


def post_rejected(h: str, cap: int, sender: str) -> str:
    return f"{h}: post REJECTED (inbox full, cap {cap}) from {sender}"


def wake_queued(h: str, n: int) -> str:
    return f"{h}: wake QUEUED (parent concurrency {n})"


def dequeued(h: str) -> str:
    return f"{h}: DEQUEUED wake (slot freed)"


def running_again(h: str) -> str:
    return f"{h}: idle→running (resume)"
