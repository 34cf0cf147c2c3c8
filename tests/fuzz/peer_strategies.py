"""Hypothesis strategies for what hostile peers send: model server replies and webhook replies.

A reply is mostly a well-formed envelope around a hostile part (the shape a real but buggy or
malicious server sends), sometimes junk from the top. Tool-call arguments come in two kinds the
test tells apart: a small valid JSON object, or something that is not one (not JSON, a list, a
number, nesting far past every limit) — on which the tool must never run.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

from tests.fuzz.strategies import json_values

TOOL = "hook"
_huge = st.sampled_from([0, -1, 2**31, 2**53 + 1, 2**63, 10**20, -(10**20)])
_ints = st.integers(-5, 5) | _huge
texts = st.text(max_size=40) | st.sampled_from(["", "\x00", "é" * 200, "x" * 20_000])
junk = json_values | _huge | texts


def nested(levels: int, open_: str = "[", close: str = "]") -> str:
    return open_ * levels + close * levels


valid_arguments = st.dictionaries(st.text(max_size=6), json_values, max_size=3).map(json.dumps)
invalid_arguments = st.one_of(
    st.sampled_from(["{not json", "[1, 2]", "42", "null", '"text"', "{", "\x00", "{\"a\": NaN"]),
    st.integers(30, 100_000).map(nested),
    st.integers(30, 2_000).map(lambda n: '{"a":' * n + "1" + "}" * n),
)


@st.composite
def tool_calls(draw: st.DrawFn) -> tuple[Any, bool]:
    """A ``tool_calls`` value and whether the tool may run: some call names it with valid arguments
    (a value that is not a list of calls must run nothing)."""
    shape = draw(st.sampled_from(["calls", "calls", "calls", "string", "junk-items", "object"]))
    if shape == "string":
        return draw(texts), False
    if shape == "object":
        return {"function": {"name": TOOL, "arguments": "{}"}}, False
    if shape == "junk-items":
        return draw(st.lists(junk, min_size=1, max_size=3)), False
    calls, may_run = [], False
    for i in range(draw(st.integers(1, 3))):
        valid = draw(st.booleans())
        args = draw(valid_arguments if valid else invalid_arguments)
        name = draw(st.sampled_from([TOOL, TOOL, TOOL, "", "ghost", 42, None]))
        may_run |= valid and name == TOOL
        call = {"id": draw(st.sampled_from([f"call_{i}", "", 7, None, "c" * 300])), "type": "function",
                "function": {"name": name, "arguments": args}}
        calls.append(call)
    return calls, may_run


@st.composite
def model_replies(draw: st.DrawFn) -> tuple[Any, bool]:
    """A chat.completion body (or junk) and whether the tool may run on it."""
    if draw(st.integers(0, 9)) == 0:
        return draw(junk), False
    message: dict[str, Any] = {"role": draw(st.sampled_from(["assistant", "assistant", "user", 3]))}
    message["content"] = draw(st.none() | texts | junk)
    may_run = False
    if draw(st.booleans()):
        message["tool_calls"], may_run = draw(tool_calls())
    usage = draw(st.none() | junk | st.fixed_dictionaries(
        {"prompt_tokens": _ints | texts, "completion_tokens": _ints, "total_tokens": _ints}))
    choice = draw(st.sampled_from(["ok", "ok", "ok", "missing", "empty", "junk"]))
    choices: Any = {"ok": [{"index": 0, "message": message, "finish_reason": "stop"}], "missing": None,
                    "empty": [], "junk": draw(junk)}[choice]
    body: dict[str, Any] = {"id": "c", "object": "chat.completion", "created": 0, "model": "m",
                            "choices": choices, "usage": usage}
    return {k: v for k, v in body.items() if v is not None}, may_run


def _deep(levels: int) -> Any:
    value: Any = {"leaf": 1}
    for _ in range(levels):
        value = {"d": value}
    return value


pending_requests = st.fixed_dictionaries({}, optional={
    "id": texts | junk | st.sampled_from(["q-ok", "i" * 300, "a\x00b"]),
    "kind": texts | junk, "prompt": texts | junk,
    "url": texts | junk | st.just({"evil": True}),
    "expires_at": texts | junk | st.sampled_from(["2999-01-01T00:00:00Z", "1970-01-01T00:00:00Z", 12345]),
    "data": junk | st.integers(20, 150).map(_deep),
})

webhook_replies = st.one_of(
    junk,
    st.fixed_dictionaries({}, optional={
        "output": texts | junk, "is_error": junk, "metadata": junk | st.integers(20, 150).map(_deep),
        "pending": pending_requests | junk,
    }),
)
