"""The spans of a turn, a model call and a tool call, in the GenAI conventions (``tracing``).

A turn's span starts when its task starts (a wake, an accepted answer, a recovery) and ends
when the task does: with the result, or with a ``toolnexus.suspended`` event when the handle
suspends. Its trace context is kept in the checkpoint — the span's own ``traceparent`` and the
parent its continuations hang under — so the turn that continues after an answer, a restart
or a take-over by another daemon starts a span of the same trace, linked to the one before.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from ...llm.base import ModelReply
from ...model import JSON, HandleState, Status, ToolResult
from ..state.checkpoint import Call
from ..state.handle import Handle
from . import tracing
from .tracing import AttrValue, Span

if TYPE_CHECKING:
    from .context import Traced

# how much of an error text becomes a span's status description
MAX_STATUS = 256


def _base(rt: Traced, h: Handle, operation: str) -> dict[str, AttrValue]:
    return {"gen_ai.operation.name": operation, "gen_ai.agent.name": h.agent,
            "gen_ai.conversation.id": rt.id, "toolnexus.handle": h.id}


def provider(rt: Traced, h: Handle) -> str:
    """The style of the LLM config of ``h``'s own registry version (a pinned handle may run an
    older one than the runtime's latest)."""
    return str(rt.llm_of(h).style)


def start_turn(rt: Traced, h: Handle) -> Span:
    """The span of ``h``'s turn from now until its task ends; the checkpoint keeps its context."""
    tracer, cp = rt.deps.tracer, h.cp
    if not tracer.enabled or cp is None:
        return tracing.NOOP_SPAN
    before = cp.trace_span  # the span of this turn that suspended (or that a crash cut short)
    parent = cp.trace_parent or before
    attrs = _base(rt, h, "invoke_agent")
    attrs["gen_ai.provider.name"] = provider(rt, h)
    agent = rt.registry_of(h).agents.get(h.agent)
    model = agent.model if agent is not None and agent.model not in ("", "inherit") else rt.llm_of(h).model
    attrs["gen_ai.request.model"] = model
    if before:
        attrs["toolnexus.continued"] = True
    span = tracer.start(f"invoke_agent {h.agent}", "internal", attrs, parent=parent, link=before)
    # later continuations hang under the same parent (the first span when the turn had none)
    cp.trace_parent, cp.trace_span = parent, span.traceparent or before
    return span


def end_turn(h: Handle, span: Span, stopped: bool) -> None:
    """End the turn's span: suspended (with the request's id and kind, never its prompt), settled,
    or stopped with the daemon (``stopped``: the turn continues at the next start)."""
    if span is tracing.NOOP_SPAN:
        return
    if h.state is HandleState.SUSPENDED and h.pending is not None:
        span.event("toolnexus.suspended", {"toolnexus.request.id": h.pending.id,
                                           "toolnexus.request.kind": h.pending.kind})
        span.set({"toolnexus.state": "suspended"})
        span.end()
        return
    if stopped:
        span.set({"toolnexus.state": "stopped"})
        span.end()
        return
    result = h.last_result
    span.set({"toolnexus.state": str(h.state), **({"toolnexus.result.status": str(result.status)}
                                                  if result is not None else {})})
    failed = result is not None and result.status is Status.ERROR
    span.end(error=result.text[:MAX_STATUS] if failed and result is not None else "")


# ---------------------------------------------------------------- model calls


def start_model(rt: Traced, h: Handle, body: JSON) -> Span:
    tracer = rt.deps.tracer
    if not tracer.enabled:
        return tracing.NOOP_SPAN
    model = str(body.get("model") or "")
    attrs = _base(rt, h, "chat")
    attrs.update({"gen_ai.provider.name": provider(rt, h), "gen_ai.request.model": model})
    if tracer.capture_content:
        attrs["gen_ai.input.messages"] = _dumps([_message(m) for m in body.get("messages") or []])
    return tracer.start(f"chat {model}", "client", attrs, parent=tracing.current_turn.get().traceparent)


def end_model(rt: Traced, span: Span, reply: ModelReply | None, error: str = "") -> None:
    if span is tracing.NOOP_SPAN:
        return
    if reply is not None:
        attrs: dict[str, AttrValue] = {"gen_ai.usage.input_tokens": reply.usage.prompt_tokens,
                                       "gen_ai.usage.output_tokens": reply.usage.completion_tokens}
        if reply.model:
            attrs["gen_ai.response.model"] = reply.model
        if reply.finish_reason:
            attrs["gen_ai.response.finish_reasons"] = [reply.finish_reason]
        if reply.usage.estimated:
            attrs["toolnexus.usage.estimated"] = True
        if rt.deps.tracer.capture_content:
            attrs["gen_ai.output.messages"] = _dumps([_message(reply.message, reply.finish_reason)])
        span.set(attrs)
    span.end(error=error[:MAX_STATUS])


# ---------------------------------------------------------------- tool calls


def start_tool(rt: Traced, h: Handle, call: Call) -> Span:
    tracer = rt.deps.tracer
    if not tracer.enabled:
        return tracing.NOOP_SPAN
    attrs = _base(rt, h, "execute_tool")
    attrs.update({"gen_ai.tool.name": call.name, "gen_ai.tool.call.id": call.tool_call_id,
                  "gen_ai.tool.type": "function", "toolnexus.call_id": call.call_id})
    if tracer.capture_content:
        attrs["gen_ai.tool.call.arguments"] = call.raw_arguments or _dumps(call.arguments)
    return tracer.start(f"execute_tool {call.name}", "internal", attrs,
                        parent=tracing.current_turn.get().traceparent)


def end_tool(rt: Traced, span: Span, result: ToolResult | None, error: str = "") -> None:
    if span is tracing.NOOP_SPAN:
        return
    if result is not None:
        outcome = "pending" if result.pending else ("error" if result.is_error else "ok")
        attrs: dict[str, AttrValue] = {"toolnexus.outcome": outcome}
        if result.pending is not None:
            attrs.update({"toolnexus.request.id": result.pending.id,
                          "toolnexus.request.kind": result.pending.kind})
        if rt.deps.tracer.capture_content:
            attrs["gen_ai.tool.call.result"] = result.output
        span.set(attrs)
        if result.is_error and not error:
            error = "tool error"
    span.end(error=error[:MAX_STATUS])


# ---------------------------------------------------------------- content (--otel-capture-content)


def _message(m: JSON, finish_reason: str = "") -> JSON:
    """An OpenAI-shaped chat message in the conventions' form: a role and typed parts."""
    role = str(m.get("role") or "")
    parts: list[JSON] = []
    content = m.get("content")
    if role == "tool":
        parts.append({"type": "tool_call_response", "id": m.get("tool_call_id"), "response": content})
    elif isinstance(content, str) and content:
        parts.append({"type": "text", "content": content})
    elif isinstance(content, list):
        parts += [{"type": "text", "content": p.get("text", "")} for p in content if isinstance(p, dict)]
    for tc in m.get("tool_calls") or []:
        fn = tc.get("function") or {}
        parts.append({"type": "tool_call", "id": tc.get("id"), "name": fn.get("name"),
                      "arguments": fn.get("arguments")})
    out: JSON = {"role": role, "parts": parts}
    if finish_reason:
        out["finish_reason"] = finish_reason
    return out


def _dumps(value: object) -> str:
    return json.dumps(value, default=str, ensure_ascii=False)

