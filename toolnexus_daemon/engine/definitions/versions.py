"""Registry versions of a runtime (docs/versions.md): what a version is, its digest, its record.

Every ``New`` whose registry (agents with their tools — and whatever else an ``AgentDef`` holds —
and the LLM config) differs from the runtime's latest makes a new version, numbered per runtime
from 1; an identical registry is the same version. Each handle is pinned to one version
(``Handle.version``) and runs that version's soul, model, tools and team whatever was deployed
since. Versions are stored once each (the ``versions`` table), never per handle; the runtime
record names the latest.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ...model import JSON, AgentDef, LlmConfig

# the width of a version's key: zero-padded so that key order is number order
KEY_DIGITS = 12


@dataclass(frozen=True)
class RegistryVersion:
    number: int
    digest: str
    created_at: float
    agents: Mapping[str, AgentDef] = field(repr=False)
    llm: LlmConfig = field(repr=False)

    def meta(self) -> JSON:
        """What the runtime record says of its latest version (the registry itself is beside it)."""
        return {"number": self.number, "digest": self.digest, "created_at": self.created_at}

    def record(self) -> JSON:
        return {**self.meta(), "agents": [a.to_json() for a in self.agents.values()],
                "llm": self.llm.to_json()}

    @classmethod
    def from_record(cls, rec: JSON) -> RegistryVersion:
        agents = [AgentDef.from_json(a) for a in rec.get("agents") or []]
        return cls(number=int(rec.get("number") or 0), digest=str(rec.get("digest") or ""),
                   created_at=float(rec.get("created_at") or 0.0), agents={a.name: a for a in agents},
                   llm=LlmConfig.from_json(rec.get("llm")))


def make(number: int, agents: Sequence[AgentDef], llm: LlmConfig, created_at: float) -> RegistryVersion:
    return RegistryVersion(number=number, digest=digest(agents, llm), created_at=created_at,
                           agents={a.name: a for a in agents}, llm=llm)


def digest(agents: Sequence[AgentDef], llm: LlmConfig) -> str:
    """sha256 hex of the canonical registry: agents by name, every field of each (whatever an
    ``AgentDef`` holds, so fields added later are covered), keys sorted, and the LLM config."""
    canonical = {"agents": sorted((a.to_json() for a in agents), key=lambda a: str(a.get("name"))),
                 "llm": llm.to_json()}
    text = json.dumps(canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def key_of(number: int) -> str:
    """The store key of version ``number``."""
    return f"{number:0{KEY_DIGITS}d}"


def sweep_plan(records: Sequence[JSON], used: set[int], latest: int, now: float,
               grace_s: float) -> dict[str, JSON | None]:
    """What a sweep writes: an unused version (not the latest, no handle pinned to it) is marked
    ``unused_since`` now, and deleted (None) once marked ``grace_s`` ago; a used one loses its mark.

    The mark is stored, so the grace survives restarts and runs on whichever daemon sweeps next."""
    out: dict[str, JSON | None] = {}
    for rec in records:
        number = int(rec.get("number") or 0)
        since = float(rec.get("unused_since") or 0.0)
        if number == latest or number in used:
            if since:
                out[key_of(number)] = {k: v for k, v in rec.items() if k != "unused_since"}
        elif not since:
            out[key_of(number)] = {**rec, "unused_since": now}
        elif now - since >= grace_s:
            out[key_of(number)] = None
    return out
