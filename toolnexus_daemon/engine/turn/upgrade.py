"""Moving handles to the runtime's latest registry version (docs/versions.md).

A handle runs the version it was spawned or last woken under. ``WakeRequest.upgrade`` and
``ResumeRequest.upgrade`` move it — with its idle and closed descendants — to the latest version;
a running or suspended descendant keeps its own until its own wake or answer moves it (moving it
would change its tools in the middle of a step). Under ``version_policy: "latest"`` an idle
handle's wake moves that handle alone. Everything is checked before anything moves: an agent the
latest version does not define refuses the whole move (``DefinitionChanged``); what a suspended
step's answer would be fed to is checked by ``drift``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...errors import DefinitionChanged
from ...model import ROOT_ID, HandleState
from ..state.change import Change
from ..state.handle import Handle

if TYPE_CHECKING:
    from .context import Versions

LATEST = "latest"


def for_wake(rt: Versions, h: Handle, change: Change, *, explicit: bool) -> None:
    """Move ``h`` (and with ``explicit``, its idle subtree) to the latest version, into ``change``."""
    if explicit:
        moving = movable(rt, [h])
    elif rt.options.version_policy == LATEST:
        moving = [h]
    else:
        return
    move(rt, moving, change)


def movable(rt: Versions, tops: list[Handle]) -> list[Handle]:
    """``tops`` and every idle or closed descendant of theirs not on the latest version yet."""
    seen: dict[str, Handle] = {h.id: h for h in tops}
    for top in tops:
        for d in rt.table.preorder(top.id)[1:]:
            if d.state in (HandleState.IDLE, HandleState.CLOSED):
                seen.setdefault(d.id, d)
    return [h for h in seen.values() if h.id != ROOT_ID and rt.registry_of(h).number != rt.version]


def check(rt: Versions, moving: list[Handle]) -> None:
    """``DefinitionChanged`` naming every handle whose agent the latest version does not define."""
    latest = rt.registry(rt.version)
    missing = [h for h in moving if h.state is not HandleState.CLOSED and h.agent not in latest.agents]
    if missing:
        what = "; ".join(f'handle "{h.id}" runs agent "{h.agent}", which registry version {latest.number} '
                         "does not define" for h in missing)
        raise DefinitionChanged(f"cannot upgrade to the latest version: {what}")


def move(rt: Versions, moving: list[Handle], change: Change) -> None:
    """Check, then pin every handle of ``moving`` to the latest version, saved in ``change``."""
    check(rt, moving)
    for h in moving:
        h.version = rt.version
        change.save(h)
