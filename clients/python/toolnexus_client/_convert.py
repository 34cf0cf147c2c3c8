"""Protobuf <-> client values: the only module where generated messages meet ``_types``/``_defs``.

``google.protobuf.Struct`` carries every JSON-shaped value. Struct stores all
numbers as doubles, so ``dict_from`` turns integral floats back into ints
(``5.0`` -> ``5``): token counts, ``max_tokens`` and ids read naturally, and a
model request relayed to an HTTP API keeps its integer fields integers.
Proto3 has no presence for scalars, so empty strings come back as ``None``
only where the client type is optional (``url``, ``reason`` ...).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from google.protobuf import struct_pb2

from ._defs import AgentSpec, Budget, Llm, McpServer, Registry, Tool
from ._gen import runtime_pb2 as pb
from ._types import (
    JSON,
    Answer,
    Context,
    DefinitionChange,
    Event,
    HandleSnapshot,
    InboxItem,
    Info,
    InterruptResult,
    PostResult,
    Request,
    ResumeResult,
    TaskResult,
    ToolResult,
    Usage,
    VersionUse,
    Woken,
)

EMPTY_SCHEMA: JSON = {"type": "object", "properties": {}}


def struct_from(value: Mapping[str, Any] | None) -> struct_pb2.Struct:
    """A Struct holding a JSON-compatible mapping (ValueError for anything else).

    What ``Struct.update`` builds, field for field, with the plain JSON types (``dict``, ``list``,
    ``str``, ``int``, ``float``, ``bool``, ``None``) set directly: ``update`` goes through a chain of
    isinstance tests and a function call per value, and a model reply relayed on every model call
    pays it. Any other type (a tuple, a Mapping, a subclass, a Struct) takes protobuf's own path, so
    what it accepts and the errors it raises stay protobuf's."""
    out = struct_pb2.Struct()
    struct_into(out, value)
    return out


def struct_into(out: struct_pb2.Struct, value: Mapping[str, Any] | None) -> None:
    """``struct_from`` written into ``out``, an empty Struct (a new one, or one a message holds: a
    Struct given to a message's constructor or ``CopyFrom`` is copied once more)."""
    if value:
        fields = out.fields
        for key, item in (value if type(value) is dict else dict(value)).items():
            _set_value(fields[key], item)


def _set_value(target: struct_pb2.Value, value: Any) -> None:
    """``target`` set to ``value`` as ``well_known_types._SetStructValue`` sets it (``target`` is new)."""
    kind = type(value)
    if kind is str:
        target.string_value = value
    elif kind is dict:
        if value:
            fields = target.struct_value.fields
            for key, item in value.items():
                _set_value(fields[key], item)
        else:
            target.struct_value.Clear()  # an empty object is still an object (the oneof is set)
    elif kind is list:
        if value:
            add = target.list_value.values.add
            for item in value:
                _set_value(add(), item)
        else:
            target.list_value.Clear()
    elif kind is int or kind is float:
        target.number_value = value
    elif kind is bool:
        target.bool_value = value
    elif value is None:
        target.null_value = struct_pb2.NULL_VALUE
    else:
        _protobuf_set_value(target, value)


def _protobuf_set_value(target: struct_pb2.Value, value: Any) -> None:
    """``target`` set by protobuf's own conversion (``ListValue.append`` runs it), for the types the
    fast path leaves alone: what it accepts and the errors it raises are protobuf's."""
    holder = struct_pb2.ListValue()
    holder.append(value)
    target.CopyFrom(holder.values[0])


def dict_from(value: struct_pb2.Struct) -> JSON:
    """The mapping a Struct holds, integral numbers as ints.

    What ``json_format.MessageToDict`` gives for a Struct (integral floats then made ints), read
    straight off the messages: ``MessageToDict`` walks every Value through its generic printer,
    and each model call's request arrives as a Struct."""
    fields = value.fields  # indexed by key: faster than the map's items() view
    return {key: _value(fields[key]) for key in fields}


def _value(value: struct_pb2.Value) -> Any:
    """One Value as ``MessageToDict`` prints it (unset and null: None; inf/NaN: its ValueError),
    an integral number as an int."""
    kind = value.WhichOneof("kind")
    if kind == "string_value":
        return value.string_value
    if kind == "struct_value":
        fields = value.struct_value.fields
        return {key: _value(fields[key]) for key in fields}
    if kind == "list_value":
        return [_value(item) for item in value.list_value.values]
    if kind == "number_value":
        number = value.number_value
        if number.is_integer():
            return int(number)
        if math.isinf(number):
            raise ValueError("Fail to serialize Infinity for Value.number_value, which would parse as "
                             "string_value")
        if math.isnan(number):
            raise ValueError("Fail to serialize NaN for Value.number_value, which would parse as "
                             "string_value")
        return number
    if kind == "bool_value":
        return value.bool_value
    return None


def _optional_struct(message: Any, name: str) -> JSON | None:
    return dict_from(getattr(message, name)) if message.HasField(name) else None


# ---------------------------------------------------------------- values


def request_to_pb(request: Request) -> pb.Request:
    out = pb.Request(id=request.id, kind=request.kind, prompt=request.prompt, url=request.url or "",
                     expires_at=request.expires_at or "")
    if request.data is not None:
        out.data.CopyFrom(struct_from(request.data))
    return out


def request_from_pb(message: pb.Request) -> Request:
    return Request(id=message.id, kind=message.kind, prompt=message.prompt, url=message.url or None,
                   data=_optional_struct(message, "data"), expires_at=message.expires_at or None,
                   answer_url=message.answer_url or None)


def answer_to_pb(answer: Answer) -> pb.Answer:
    out = pb.Answer(id=answer.id, ok=answer.ok, reason=answer.reason or "")
    if answer.data is not None:
        out.data.CopyFrom(struct_from(answer.data))
    return out


def answer_from_pb(message: pb.Answer) -> Answer:
    return Answer(id=message.id, ok=message.ok, data=_optional_struct(message, "data"),
                  reason=message.reason or None)


def task_result_from_pb(message: pb.TaskResult) -> TaskResult:
    pending = request_from_pb(message.pending) if message.HasField("pending") else None
    return TaskResult(status=message.status, text=message.text, is_error=message.is_error, pending=pending,
                      turns=message.turns, total_tokens=message.total_tokens, limit=message.limit,
                      usage_estimated=message.usage_estimated)


def _optional_result(message: Any, name: str) -> TaskResult | None:
    return task_result_from_pb(getattr(message, name)) if message.HasField(name) else None


def _optional_request(message: Any, name: str) -> Request | None:
    return request_from_pb(getattr(message, name)) if message.HasField(name) else None


def snapshot_from_pb(message: pb.HandleSnapshot) -> HandleSnapshot:
    inbox = tuple(InboxItem(sender=getattr(i, "from"), channel=i.channel, text=i.text) for i in message.inbox)
    usage = Usage(message.usage.prompt_tokens, message.usage.completion_tokens, message.usage.total_tokens)
    return HandleSnapshot(
        id=message.id, agent=message.agent, state=message.state, parent=message.parent,
        children=tuple(message.children), last_result=_optional_result(message, "last_result"),
        usage_total=message.usage_total, turns_total=message.turns_total,
        pending=_optional_request(message, "pending"), inbox=inbox, task_key=message.task_key,
        usage=usage, depth=message.depth, usage_estimated=message.usage_estimated,
        definition_changed=tuple(definition_change_from_pb(c) for c in message.definition_changed),
        version=message.version)


def version_use_from_pb(message: pb.VersionUse) -> VersionUse:
    v = message.version
    return VersionUse(number=v.number, digest=v.digest, created_at=v.created_at, handles=message.handles,
                      latest=message.latest)


def definition_change_from_pb(message: pb.DefinitionChange) -> DefinitionChange:
    return DefinitionChange(part=message.part, name=message.name, change=message.change,
                            summary=message.summary, refuses_resume=message.refuses_resume,
                            added=tuple(message.added), removed=tuple(message.removed),
                            retyped=tuple(message.retyped))


def event_from_pb(message: pb.Event) -> Event:
    return Event(seq=message.seq, runtime_id=message.runtime_id, handle=message.handle, type=message.type,
                 from_state=message.from_state, to_state=message.to_state, note=message.note,
                 pending=_optional_request(message, "pending"), result=_optional_result(message, "result"),
                 at=message.at, data=_optional_struct(message, "data"))


def woken_from_pb(handle: str, message: pb.SpawnResponse | pb.WakeResponse) -> Woken:
    return Woken(handle=handle, queued=message.queued, result=_optional_result(message, "result"))


def resume_from_pb(message: pb.ResumeResponse) -> ResumeResult:
    return ResumeResult(handle=message.handle, result=_optional_result(message, "result"),
                        duplicate=message.duplicate)


def info_from_pb(message: pb.InfoResponse) -> Info:
    return Info(version=message.version, store_path=message.store_path,
                store_size_bytes=message.store_size_bytes, limits=dict(message.limits),
                runtimes=message.runtimes, format_version=message.format_version,
                runtime_version=message.runtime_version,
                versions_without_worker=tuple(message.versions_without_worker),
                listen=tuple(message.listen), config=dict(message.config),
                metrics_address=message.metrics_address)


def inbox_item_to_pb(sender: str, channel: str, text: str) -> pb.InboxItem:
    return pb.InboxItem(**{"from": sender, "channel": channel, "text": text})


# ---------------------------------------------------------------- worker channel


def context_from_call(runtime_id: str, call: pb.ToolCall) -> tuple[JSON, Context]:
    """The arguments and Context a native tool is invoked with."""
    answer = answer_from_pb(call.answer) if call.HasField("answer") else None
    ctx = Context(call_id=call.call_id, handle=call.handle, runtime_id=runtime_id, tool=call.tool,
                  answer=answer, action_id=call.action_id or call.call_id, traceparent=call.traceparent)
    return dict_from(call.arguments), ctx


def outcome_to_pb(call_id: str, result: ToolResult) -> pb.ToolOutcome:
    out = pb.ToolOutcome(call_id=call_id, output=result.output, is_error=result.is_error)
    if result.metadata is not None:
        out.metadata.CopyFrom(struct_from(result.metadata))
    if result.pending is not None:
        out.pending.CopyFrom(request_to_pb(result.pending))
    return out


# ---------------------------------------------------------------- registry


def tool_to_pb(tool: Tool) -> pb.ToolDef:
    out = pb.ToolDef(name=tool.name, description=tool.description, source=tool.source,
                     input_schema=struct_from(tool.input_schema or EMPTY_SCHEMA),
                     deadline_ms=tool.deadline_ms, on_crash=tool.on_crash,
                     answer_link=tool.answer_link)
    if tool.endpoint is not None:
        spec = tool.endpoint
        out.http.CopyFrom(pb.HttpConfig(method=spec.method, url=spec.url, headers=dict(spec.headers),
                                        query=list(spec.query), timeout_ms=spec.timeout_ms))
    return out


def budget_to_pb(budget: Budget) -> pb.Budget:
    return pb.Budget(max_turns=budget.max_turns, max_tokens=budget.max_tokens,
                     max_tool_calls=budget.max_tool_calls, max_wall_ms=budget.max_wall_ms,
                     max_children=budget.max_children, max_concurrent=budget.max_concurrent,
                     max_depth=budget.max_depth)


def mcp_server_to_pb(server: McpServer) -> pb.McpServer:
    return pb.McpServer(name=server.name, url=server.url, headers=dict(server.headers),
                        tools=list(server.tools), timeout_ms=server.timeout_ms, on_crash=server.on_crash)


def agent_to_pb(spec: AgentSpec) -> pb.AgentDef:
    out = pb.AgentDef(name=spec.name, does=spec.does, model=spec.model, soul=spec.soul,
                      tools=[tool_to_pb(t) for t in spec.tools], team=list(spec.team), wait_for=spec.wait_for,
                      answer_link=spec.answer_link,
                      mcp_servers=[mcp_server_to_pb(s) for s in spec.mcp_servers])
    if spec.budget is not None:
        out.budget.CopyFrom(budget_to_pb(spec.budget))
    if spec.request_params:
        out.request_params.CopyFrom(struct_from(spec.request_params))
    return out


def llm_to_pb(llm: Llm) -> pb.LlmConfig:
    out = pb.LlmConfig(style=llm.style, base_url=llm.base_url, model=llm.model, api_key_env=llm.api_key_env,
                       headers=dict(llm.headers), retries=llm.retries, timeout_ms=llm.timeout_ms,
                       stream=llm.stream, max_tokens=llm.max_tokens)
    if llm.request_params:
        out.request_params.CopyFrom(struct_from(llm.request_params))
    return out


def options_to_pb(options: Mapping[str, Any] | None) -> pb.RuntimeOptions:
    """RuntimeOptions from a dict of its field names (ValueError naming an unknown one)."""
    known = set(pb.RuntimeOptions.DESCRIPTOR.fields_by_name)
    unknown = sorted(set(options or {}) - known)
    if unknown:
        raise ValueError(f"unknown runtime option(s): {', '.join(unknown)} "
                         f"(known: {', '.join(sorted(known))})")
    return pb.RuntimeOptions(**dict(options or {}))


def new_request(registry: Registry, llm: Llm, options: Mapping[str, Any] | None, runtime_id: str | None,
                runtime_key: str | None) -> pb.NewRequest:
    return pb.NewRequest(runtime_id=runtime_id or "", agents=[agent_to_pb(a) for a in registry.agents],
                         llm=llm_to_pb(llm), options=options_to_pb(options), runtime_key=runtime_key or "")


def post_result_from_pb(reply: pb.PostResponse) -> PostResult:
    return PostResult(position=reply.position, inbox_cap=reply.inbox_cap)


def interrupt_result_from_pb(reply: pb.InterruptResponse) -> InterruptResult:
    return InterruptResult(from_state=reply.from_state, cancelled_request=reply.cancelled_request,
                           inbox_restored=reply.inbox_restored)
