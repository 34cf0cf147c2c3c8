"""The fingerprint of what a suspended step's answer will be fed to, and how the registry drifted
from it since (docs/protocol.md §11 Definition drift).

A durable suspension records, in its checkpoint, the suspended tool's name and input schema and
the agent's soul (as a digest) and effective model. Comparing that with the registry a later
``New`` reattached gives the ``DefinitionChange``s that ``Snapshot.definition_changed`` shows:
a tool that is gone or whose schema changed refuses ``Resume`` (the answer would be fed to a
different tool than the one that asked); a soul or model change is only reported.

A parent suspended on a child's ``task`` call records no tool: ``task`` is built into the daemon
(its arguments never change), and the answer is fed to the leaf's tool, which the leaf's own
fingerprint covers. The parent still records its soul and model, which read the child's result.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from ...model import JSON, AgentDef, LlmConfig
from .schemadiff import capped, diff


@dataclass(frozen=True)
class Fingerprint:
    soul: str  # sha256 hex of the agent's soul: souls are long, only "did it change" matters
    model: str  # the effective model ("inherit" resolved against llm.model)
    tool: str = ""  # the suspended tool; empty for a parent suspended on its child's ``task`` call
    schema: JSON | None = None  # that tool's input schema as it was

    def to_json(self) -> JSON:
        d: JSON = {"soul": self.soul, "model": self.model}
        if self.tool:
            d["tool"], d["schema"] = self.tool, self.schema or {}
        return d

    @classmethod
    def from_json(cls, d: JSON) -> Fingerprint:
        return cls(soul=str(d.get("soul") or ""), model=str(d.get("model") or ""),
                   tool=str(d.get("tool") or ""), schema=d.get("schema") if d.get("tool") else None)


@dataclass(frozen=True)
class DefinitionChange:
    """One difference between a fingerprint and the registry now (the proto's DefinitionChange)."""

    part: str  # "tool", "soul" or "model"
    name: str  # the tool's name; the agent's for soul and model
    change: str  # "removed" or "schema" (a tool), "changed" (soul, model)
    summary: str
    refuses_resume: bool = False
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    retyped: tuple[str, ...] = ()
    detail: str = ""  # a schema change in words, without the tool's name (for Resume's refusal)

    def to_json(self) -> JSON:
        return {"part": self.part, "name": self.name, "change": self.change, "summary": self.summary,
                "refuses_resume": self.refuses_resume, "added": list(self.added),
                "removed": list(self.removed), "retyped": list(self.retyped)}


def effective_model(agent: AgentDef, llm: LlmConfig) -> str:
    return llm.model if agent.model in ("", "inherit") else agent.model


def soul_digest(soul: str) -> str:
    return hashlib.sha256(soul.encode()).hexdigest()


def take(agent: AgentDef, llm: LlmConfig, tool_name: str = "") -> Fingerprint:
    """The fingerprint of a step suspending on ``tool_name`` (empty: on a child's ``task`` call)."""
    tool = next((t for t in agent.tools if t.name == tool_name), None) if tool_name else None
    return Fingerprint(soul=soul_digest(agent.soul), model=effective_model(agent, llm),
                       tool=tool.name if tool is not None else "",
                       schema=dict(tool.input_schema) if tool is not None else None)


def changes(fp: Fingerprint, agent: AgentDef, llm: LlmConfig) -> list[DefinitionChange]:
    """Every difference between ``fp`` and ``agent`` as registered now: tool first, then soul, model."""
    out: list[DefinitionChange] = []
    if fp.tool:
        out += _tool_change(fp, agent)
    if fp.soul and soul_digest(agent.soul) != fp.soul:
        out.append(DefinitionChange("soul", agent.name, "changed", f'soul of agent "{agent.name}" changed'))
    model = effective_model(agent, llm)
    if model != fp.model:
        out.append(DefinitionChange("model", agent.name, "changed",
                                    f'model of agent "{agent.name}" changed: {fp.model or "none"} → '
                                    f'{model or "none"}'))
    return out


def _tool_change(fp: Fingerprint, agent: AgentDef) -> list[DefinitionChange]:
    tool = next((t for t in agent.tools if t.name == fp.tool), None)
    if tool is None:
        return [DefinitionChange("tool", fp.tool, "removed", f'tool "{fp.tool}" was removed',
                                 refuses_resume=True)]
    found = diff(fp.schema, tool.input_schema)
    if not found:
        return []
    detail = found.describe()
    return [DefinitionChange("tool", fp.tool, "schema", f'tool "{fp.tool}" input schema changed: {detail}',
                             refuses_resume=True, added=tuple(capped(found.added)),
                             removed=tuple(capped(found.removed)), retyped=tuple(capped(found.retyped)),
                             detail=detail)]


def refusal(found: list[DefinitionChange], request_id: str) -> str:
    """Why Resume refuses (empty: it does not), with what to do about it."""
    refusing = [c for c in found if c.refuses_resume]
    if not refusing:
        return ""
    what = "; ".join(_since(c, request_id) for c in refusing)
    return f"{what}; resume with accept_changed_definition to feed the answer to the new definition"


def _since(c: DefinitionChange, request_id: str) -> str:
    if c.change == "removed":
        return f'tool "{c.name}" was removed since request "{request_id}" suspended'
    return f'tool "{c.name}" changed since request "{request_id}" suspended: input schema {c.detail}'
