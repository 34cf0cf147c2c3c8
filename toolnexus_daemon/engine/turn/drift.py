"""Definition drift of a runtime's suspended handles: recorded at suspension, reported by
Snapshot and at reattachment, enforced by Resume (docs/protocol.md §11 Definition drift).

The comparisons themselves are ``fingerprint``'s; this module knows where the fingerprint lives
(the checkpoint of a durably suspended handle) and which registry to compare it with.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ...errors import DataLoss, DefinitionChanged, StoreError
from ...model import AgentDef, EventType, HandleState, LlmConfig
from ..definitions.fingerprint import DefinitionChange, Fingerprint, changes, refusal, take
from ..state.change import Change, EventSpec
from ..state.handle import Handle

if TYPE_CHECKING:
    from .context import Latest, Pinned, Reattaching

log = logging.getLogger("toolnexus_daemon.engine")


def record(rt: Pinned, h: Handle, tool_name: str) -> None:
    """Fingerprint what the answer will be fed to, in ``h``'s checkpoint (committed by the caller)."""
    assert h.cp is not None
    h.cp.fingerprint = take(rt.agent_of(h), rt.llm_of(h), tool_name)


def found(rt: Latest, h: Handle) -> list[DefinitionChange]:
    """What changed since ``h`` suspended durably (nothing for any other state, an old checkpoint
    without a fingerprint, or an agent the registry no longer has — Resume refuses that already)."""
    return _against(h, rt.agents, rt.llm)


def check_resume(rt: Latest, chain: list[Handle], request_id: str, *,
                 accept: bool) -> list[DefinitionChange]:
    """FAILED_PRECONDITION naming each refusing change of ``chain`` (raised before the answer is
    consumed), unless ``accept`` (``accept_changed_definition``): then the refusing changes the
    answer is fed through anyway, for the record."""
    refusing = [c for h in chain for c in found(rt, h) if c.refuses_resume]
    if refusing and not accept:
        raise DefinitionChanged(refusal(refusing, request_id))
    return refusing


async def report_reattach(rt: Reattaching, before: Mapping[str, AgentDef], before_llm: LlmConfig,
                          after: Mapping[str, AgentDef], after_llm: LlmConfig) -> int:
    """A ``reattach`` event on each suspended handle to which the registry ``after`` (a reattaching
    ``New``'s) brings a difference from ``before``; returns how many were written.

    It runs after ``New`` returned (the engine starts it in the background): a deploy costs the
    same at any number of parked handles. Only agents whose definition (or whose inherited model)
    changed are looked at, so the common reattach — the same registry again — reads no handle at
    all; otherwise the stored records are read once, off the event loop, and no handle is loaded."""
    inherited_model_changed = after_llm.model != before_llm.model
    touched = {name for name, agent in after.items() if before.get(name) != agent
               or (inherited_model_changed and agent.model in ("", "inherit"))}
    if not touched:
        return 0
    loaded = {h.id: h for h in rt.table.loaded() if h.agent in touched}
    found = [(h.id, h.pending.id, now) for h in loaded.values()
             if h.pending is not None and (now := _news(_fingerprint(h), h.agent, before, before_llm,
                                                            after, after_llm))]
    try:
        found += await asyncio.to_thread(_stored_news, rt, touched, set(loaded), before, before_llm,
                                         after, after_llm)
    except (DataLoss, StoreError) as exc:
        log.warning("definition drift: stored handles unreadable, only loaded ones are compared",
                    extra={"runtime": rt.id, "error": str(exc)})
    if not found:
        return 0
    change = Change()
    for hid, request_id, now in found:
        summaries = "; ".join(c.summary for c in now)
        note = f'{hid}: definition changed while suspended on "{request_id}" ({summaries})'
        change.events.append(EventSpec(hid, EventType.REATTACH, note, data={
            "request_id": request_id, "definition_changed": [c.to_json() for c in now]}))
    await rt.commit(change)
    return len(found)


def _fingerprint(h: Handle) -> Fingerprint | None:
    if h.state is not HandleState.SUSPENDED or h.escalating or h.cp is None:
        return None
    return h.cp.fingerprint


def _news(fp: Fingerprint | None, agent: str, before: Mapping[str, AgentDef], before_llm: LlmConfig,
          after: Mapping[str, AgentDef], after_llm: LlmConfig) -> list[DefinitionChange]:
    """The differences ``after`` brings to a suspension fingerprinted ``fp`` that ``before`` did
    not already show (empty: nothing new to report)."""
    now_agent = after.get(agent)
    if fp is None or now_agent is None:
        return []
    now = changes(fp, now_agent, after_llm)
    was_agent = before.get(agent)
    was = changes(fp, was_agent, before_llm) if was_agent is not None else []
    return now if now and now != was else []


def _stored_news(rt: Reattaching, agents: set[str], skip: set[str], before: Mapping[str, AgentDef],
                 before_llm: LlmConfig, after: Mapping[str, AgentDef],
                 after_llm: LlmConfig) -> list[tuple[str, str, list[DefinitionChange]]]:
    """``_news`` of every stored suspended handle of ``agents`` not in ``skip`` (store reads only:
    it runs on a thread)."""
    store, out = rt.deps.store, []
    for rec in store.handles(rt.id):
        hid, pending = str(rec.get("id")), rec.get("pending")
        if (hid in skip or rec.get("state") != HandleState.SUSPENDED or rec.get("agent") not in agents
                or rec.get("escalating") or not isinstance(pending, dict)):
            continue
        cp = store.get_checkpoint(rt.id, hid) or {}
        fp = Fingerprint.from_json(cp["fingerprint"]) if isinstance(cp.get("fingerprint"), dict) else None
        now = _news(fp, str(rec.get("agent")), before, before_llm, after, after_llm)
        if now:
            out.append((hid, str(pending.get("id") or ""), now))
    return out


def _against(h: Handle, agents: Mapping[str, AgentDef], llm: LlmConfig) -> list[DefinitionChange]:
    if h.state is not HandleState.SUSPENDED or h.escalating or h.cp is None or h.cp.fingerprint is None:
        return []
    agent = agents.get(h.agent)
    return changes(h.cp.fingerprint, agent, llm) if agent is not None else []
