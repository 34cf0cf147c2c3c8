"""Bounds on data from peers: model replies, tool results, webhook and worker requests.

Whatever a model server, a webhook, an http tool or a worker sends is checked here
*before* it is committed (docs/protocol.md §7): a value that would break a later
read — an integer protobuf cannot carry, a string larger than a gRPC message, JSON
nested deeper than protobuf parses, a field of the wrong type — becomes an error of
that one call or turn, never a stored record that poisons every read after it.
No gRPC, no I/O: the engine calls these with the limits the operator configured.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

from .clock import strict_rfc3339
from .model import JSON, Request, ToolResult, Usage

MIB = 1024 * 1024
# far above any real usage, far below what int64 fields and JSON doubles carry exactly
MAX_TOKENS = 10**12
# the request index keys records by id: LMDB keys hold at most ~500 bytes with the runtime id
MAX_REQUEST_ID_BYTES = 250


@dataclass(frozen=True)
class PeerLimits:
    """What one peer message may carry; every field is a flag (docs/operations.md, Limits)."""

    model_reply_bytes: int = 1 * MIB
    tool_output_bytes: int = 1 * MIB
    request_prompt_bytes: int = 64 * 1024
    request_data_bytes: int = 256 * 1024
    json_depth: int = 24
    # total time one tool call may take when its ToolDef sets no deadline_ms (a worker that took
    # the call and never replies must not keep the handle running forever)
    tool_deadline_ms: int = 600_000


class PeerDataError(ValueError):
    """A peer's message breaks a bound; the text says which and is shown to the caller."""


def depth_of(value: object, limit: int) -> int:
    """Nesting depth of a JSON value, counted without recursion and stopping past ``limit``."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth)
            if deepest > limit:
                return deepest
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return deepest


def encoded_size(value: object) -> int:
    """Bytes of ``value`` as compact JSON (what the store and the wire carry, near enough)."""
    return len(json.dumps(value, separators=(",", ":"), default=str).encode())


def check_json(value: object, what: str, max_bytes: int, limits: PeerLimits) -> None:
    """Refuse JSON nested deeper than the limit or larger than ``max_bytes``."""
    if depth_of(value, limits.json_depth) > limits.json_depth:
        raise PeerDataError(f"{what} is nested deeper than {limits.json_depth} levels")
    size = encoded_size(value)
    if size > max_bytes:
        raise PeerDataError(f"{what} is {size} bytes, over the limit of {max_bytes}")


# ---------------------------------------------------------------- model replies


def check_reply(message: JSON, usage: Usage, limits: PeerLimits) -> None:
    """A model's assistant message and usage, before the reply is committed."""
    for name, count in (("prompt_tokens", usage.prompt_tokens),
                        ("completion_tokens", usage.completion_tokens), ("total_tokens", usage.total_tokens)):
        if not 0 <= count <= MAX_TOKENS:
            raise PeerDataError(f"model reply: usage {name} {count} is out of range (0..{MAX_TOKENS})")
    if depth_of(message, limits.json_depth) > limits.json_depth:
        raise PeerDataError(f"model reply is nested deeper than {limits.json_depth} levels")
    size = encoded_size(message)
    if size > limits.model_reply_bytes:
        raise PeerDataError(f"model reply is {size} bytes, over --max-model-reply-bytes "
                            f"({limits.model_reply_bytes})")
    content = message.get("content")
    if content is not None and not isinstance(content, str | list):
        raise PeerDataError(f"model reply: content is {type(content).__name__}, not text")
    _check_tool_calls(message.get("tool_calls"))


def _check_tool_calls(calls: object) -> None:
    if calls is None:
        return
    if not isinstance(calls, list):
        raise PeerDataError(f"model reply: tool_calls is {type(calls).__name__}, not a list")
    for i, call in enumerate(calls):
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict):
            raise PeerDataError(f"model reply: tool_calls[{i}] is not a function call object")
        if not isinstance(fn.get("name"), str) or not fn["name"]:
            raise PeerDataError(f"model reply: tool_calls[{i}] has no function name")
        if not isinstance(call.get("id", ""), str | int):
            raise PeerDataError(f"model reply: tool_calls[{i}].id is not a string")


def parse_arguments(raw: object, limits: PeerLimits) -> JSON:
    """A tool call's arguments as an object; PeerDataError says why they are not one."""
    if isinstance(raw, dict):
        value: object = raw
    elif raw is None or raw == "":
        return {}
    elif not isinstance(raw, str):
        raise PeerDataError(f"arguments are {type(raw).__name__}, not a JSON object")
    else:
        try:
            value = json.loads(raw)
        except RecursionError:
            raise PeerDataError(f"nested deeper than {limits.json_depth} levels") from None
        except ValueError as exc:
            raise PeerDataError(str(exc)) from None
    if not isinstance(value, dict):
        raise PeerDataError(f"expected a JSON object, got {type(value).__name__}")
    if depth_of(value, limits.json_depth) > limits.json_depth:
        raise PeerDataError(f"nested deeper than {limits.json_depth} levels")
    return value


# ---------------------------------------------------------------- tool results and requests


def bounded_output(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` bytes, with a marker the model can read saying how much went."""
    data = text.encode()
    if len(data) <= limit:
        return text
    kept = data[:limit].decode(errors="ignore")
    return kept + f"\n[output truncated: {len(data)} bytes, limit {limit}]"


def check_tool_result(result: ToolResult, tool: str, limits: PeerLimits) -> ToolResult:
    """A tool's result as it may be committed: output bounded, metadata and any pending request
    checked; a request that breaks a bound makes the result an error naming the tool."""
    output = result.output if isinstance(result.output, str) else json.dumps(result.output, default=str)
    result = replace(result, output=bounded_output(output, limits.tool_output_bytes))
    try:
        if result.metadata is not None:
            if not isinstance(result.metadata, dict):
                raise PeerDataError("metadata is not an object")
            check_json(result.metadata, "metadata", limits.request_data_bytes, limits)
        if result.pending is not None:
            result = replace(result, pending=check_request(result.pending, limits))
    except PeerDataError as exc:
        return ToolResult(output=f'tool "{tool}" returned an unusable result: {exc}', is_error=True)
    return result


def check_request(req: Request, limits: PeerLimits) -> Request:
    """A pending request's fields have the types and sizes the protocol gives them."""
    for name in ("id", "kind", "prompt"):
        if not isinstance(getattr(req, name), str):
            raise PeerDataError(f"pending.{name} is not a string")
    for name in ("url", "expires_at"):
        value = getattr(req, name)
        if value is not None and not isinstance(value, str):
            raise PeerDataError(f"pending.{name} is {type(value).__name__}, not a string")
    if len(req.id.encode()) > MAX_REQUEST_ID_BYTES or "\x00" in req.id:
        raise PeerDataError(f"pending.id is over {MAX_REQUEST_ID_BYTES} bytes or holds a NUL character")
    if req.expires_at:
        expires_at = strict_rfc3339(req.expires_at)
        if expires_at is None:
            raise PeerDataError(f"pending.expires_at {req.expires_at[:64]!r} is not an RFC 3339 time with a "
                                "time zone (like 2026-12-05T10:00:00Z or 2026-12-05T12:00:00+02:00)")
        req = replace(req, expires_at=expires_at)
    for name in ("kind", "prompt", "url"):
        value = getattr(req, name) or ""
        if len(value.encode()) > limits.request_prompt_bytes:
            raise PeerDataError(f"pending.{name} is over {limits.request_prompt_bytes} bytes")
    if req.data is not None:
        if not isinstance(req.data, dict):
            raise PeerDataError("pending.data is not an object")
        check_json(req.data, "pending.data", limits.request_data_bytes, limits)
    return req
