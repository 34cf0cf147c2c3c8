"""Request-size limits the API enforces before the engine sees a request (``--max-*`` flags).

Each refusal is INVALID_ARGUMENT naming the value found, the limit and the
flag that sets it, so the caller knows both what to shrink and what an
operator could raise. The gRPC message size (RESOURCE_EXHAUSTED) is enforced
by gRPC itself and the Struct depth by ``decode``; registry limits are
returned as problems so ``New`` still names every problem at once. Ids a
request names must also be ids the store can hold (``check_ids``): one that
cannot is refused here rather than failing deep in a store lookup.
"""

from __future__ import annotations

from collections.abc import Container

from ..config import Limits
from ..errors import InvalidArgument
from ._gen import runtime_pb2 as pb

# the longest wait a fused Wake/Spawn (wait_ms) may ask for: the call holds an RPC open that long;
# a longer wait is a Wait with timeout_ms (0 = without a limit), which a client can simply repeat
MAX_WAIT_MS = 3_600_000

# the store's key layout: ids are 1-250 bytes of UTF-8, NUL separates key parts (store/codec.py)
MAX_ID_BYTES = 250


def check_prompt(limits: Limits, text: str, what: str) -> None:
    """INVALID_ARGUMENT when ``text`` is longer than ``--max-prompt-bytes`` in UTF-8."""
    # a str of n characters is at most 4n bytes: skip the encode for the common short prompt
    if len(text) * 4 <= limits.max_prompt_bytes:
        return
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > limits.max_prompt_bytes:
        raise InvalidArgument(f"{what} is {size} bytes; the limit is {limits.max_prompt_bytes} "
                              "(--max-prompt-bytes)")


def check_wait_ms(wait_ms: int) -> None:
    """INVALID_ARGUMENT when a fused call's ``wait_ms`` is negative or above ``MAX_WAIT_MS``."""
    if wait_ms < 0:
        raise InvalidArgument(f"wait_ms is {wait_ms}; it must not be negative (0 = return once the wake is "
                              "durable, without waiting for its result)")
    if wait_ms > MAX_WAIT_MS:
        raise InvalidArgument(f"wait_ms is {wait_ms}; the limit is {MAX_WAIT_MS} (one hour): wait longer "
                              "with Wait (timeout_ms 0 waits without a limit)")


def registry_problems(limits: Limits, req: pb.NewRequest) -> list[str]:
    """Registry sizes past ``--max-agents`` or ``--max-tools-per-agent``, one problem each."""
    problems: list[str] = []
    if len(req.agents) > limits.max_agents:
        problems.append(f"the registry defines {len(req.agents)} agents; the limit is {limits.max_agents} "
                        "(--max-agents)")
    for agent in req.agents:
        if len(agent.tools) > limits.max_tools_per_agent:
            problems.append(f'agent "{agent.name[:64]}" declares {len(agent.tools)} tools; the limit is '
                            f"{limits.max_tools_per_agent} (--max-tools-per-agent)")
    return problems


def check_ids(request: object) -> None:
    """INVALID_ARGUMENT when a handle, parent or answer id could never name a stored record."""
    for what in _id_fields(type(request)):
        value: object
        if what == "answer.id":
            answer: object = getattr(request, "answer", None)
            value = getattr(answer, "id", "")
        else:
            value = getattr(request, what, "")
        if isinstance(value, str) and value and ("\x00" in value or len(value.encode()) > MAX_ID_BYTES):
            raise InvalidArgument(f"{what} must be at most {MAX_ID_BYTES} bytes of UTF-8 without NUL")


def _id_fields(cls: type) -> tuple[str, ...]:
    """Which of the id fields a request type has: asking a message for a field it lacks raises
    (and catches) an AttributeError, on every RPC; a type without a descriptor is asked for all."""
    found = _ID_FIELDS.get(cls)
    if found is None:
        names = ("handle", "parent", "answer")
        descriptor: object = getattr(cls, "DESCRIPTOR", None)
        fields: Container[str] | None = getattr(descriptor, "fields_by_name", None)
        present = names if fields is None else tuple(n for n in names if n in fields)
        found = _ID_FIELDS[cls] = tuple("answer.id" if n == "answer" else n for n in present)
    return found


_ID_FIELDS: dict[type, tuple[str, ...]] = {}
