"""ListVersions and the wire form of a registry version (docs/versions.md)."""

from __future__ import annotations

from collections import Counter

from ..clock import rfc3339
from ..engine.definitions.versions import RegistryVersion
from ..engine.verbs.runtime import Runtime
from ..model import ROOT_ID
from ._gen import runtime_pb2 as pb


def version_to(v: RegistryVersion) -> pb.RegistryVersion:
    return pb.RegistryVersion(number=v.number, digest=v.digest,
                              created_at=rfc3339(v.created_at) if v.created_at else "")


def list_versions(rt: Runtime) -> pb.ListVersionsResponse:
    """Every version of ``rt``, oldest first, with the handles (root excluded) pinned to each.

    Counting reads every handle record of the runtime once: an inspection call, not a hot path."""
    used = Counter(int(rec.get("version") or 1) for rec in rt.deps.store.handles(rt.id)
                   if rec.get("id") != ROOT_ID)
    return pb.ListVersionsResponse(versions=[
        pb.VersionUse(version=version_to(v), handles=used.get(v.number, 0), latest=v.number == rt.version)
        for v in rt.stored_versions()])
