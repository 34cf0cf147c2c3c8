"""Definition drift of a runtime's suspended handles: recorded at suspension, reported by
Snapshot and at reattachment, enforced by Resume (docs/protocol.md §11 Definition drift).

The comparisons themselves are ``fingerprint``'s; this module knows where the fingerprint lives
(the checkpoint of a durably suspended handle) and which registry to compare it with.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ..errors import DataLoss, DefinitionChanged, NotFound, StoreError
from ..model import AgentDef, EventType, HandleState, LlmConfig
from .change import Change
from .fingerprint import DefinitionChange, changes, refusal, take
from .handle import Handle

if TYPE_CHECKING:
    from .context import RuntimeContext

log = logging.getLogger("toolnexus_daemon.engine")


def record(rt: RuntimeContext, h: Handle, tool_name: str) -> None:
    """Fingerprint what the answer will be fed to, in ``h``'s checkpoint (committed by the caller)."""
    assert h.cp is not None
    h.cp.fingerprint = take(rt.agent_of(h), rt.llm_of(h), tool_name)


def found(rt: RuntimeContext, h: Handle) -> list[DefinitionChange]:
    """What changed since ``h`` suspended durably (nothing for any other state, an old checkpoint
    without a fingerprint, or an agent the registry no longer has — Resume refuses that already)."""
    return _against(h, rt.agents, rt.llm)


def check_resume(rt: RuntimeContext, chain: list[Handle], request_id: str, *,
                 accept: bool) -> list[DefinitionChange]:
    """FAILED_PRECONDITION naming each refusing change of ``chain`` (raised before the answer is
    consumed), unless ``accept`` (``accept_changed_definition``): then the refusing changes the
    answer is fed through anyway, for the record."""
    refusing = [c for h in chain for c in found(rt, h) if c.refuses_resume]
    if refusing and not accept:
        raise DefinitionChanged(refusal(refusing, request_id))
    return refusing


def reattach_events(rt: RuntimeContext, before: Mapping[str, AgentDef], before_llm: LlmConfig,
                    change: Change) -> None:
    """A ``reattach`` event on each suspended handle to which the new registry brings a difference.

    Only agents whose definition (or whose inherited model) changed are looked at, so the common
    reattach — the same registry again — reads no handle at all."""
    inherited_model_changed = rt.llm.model != before_llm.model
    touched = {name for name, agent in rt.agents.items() if before.get(name) != agent
               or (inherited_model_changed and agent.model in ("", "inherit"))}
    if not touched:
        return
    for h in _suspended(rt, touched):
        now = _against(h, rt.agents, rt.llm)
        if now and now != _against(h, before, before_llm):
            assert h.pending is not None
            summaries = "; ".join(c.summary for c in now)
            change.event(h, EventType.REATTACH,
                         f'{h.id}: definition changed while suspended on "{h.pending.id}" ({summaries})',
                         data={"request_id": h.pending.id, "definition_changed": [c.to_json() for c in now]})


def _against(h: Handle, agents: Mapping[str, AgentDef], llm: LlmConfig) -> list[DefinitionChange]:
    if h.state is not HandleState.SUSPENDED or h.escalating or h.cp is None or h.cp.fingerprint is None:
        return []
    agent = agents.get(h.agent)
    return changes(h.cp.fingerprint, agent, llm) if agent is not None else []


def _suspended(rt: RuntimeContext, agents: set[str]) -> list[Handle]:
    """The suspended handles of ``agents``: stored ones and those suspended in memory only so far.

    Best effort: the events are a report, so a damaged record costs its handle's event (Snapshot
    and Resume still compare that handle when it is read), never the reattach itself."""
    try:
        stored = rt.deps.store.handles(rt.id)
    except (DataLoss, StoreError) as exc:
        log.warning("definition drift: stored handles unreadable, only loaded ones are compared",
                    extra={"runtime": rt.id, "error": str(exc)})
        stored = []
    ids = {str(rec.get("id")) for rec in stored
           if rec.get("state") == HandleState.SUSPENDED and rec.get("agent") in agents}
    ids |= {h.id for h in rt.handles.loaded() if h.state is HandleState.SUSPENDED and h.agent in agents}
    out: list[Handle] = []
    for hid in sorted(ids):
        try:
            h = rt.table.handle(hid)
        except (DataLoss, NotFound):
            continue
        if h.state is HandleState.SUSPENDED:
            out.append(h)
    return out
