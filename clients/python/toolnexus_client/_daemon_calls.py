"""The calls a ``Daemon`` makes on one runtime named by id: requests and values shared by both faces.

A ``Runtime`` is the client of one runtime it created or reattached to (and may serve the tools
of); a tool that looks after any runtime of a daemon — a console, an approval bot, the
``toolnexus-daemon`` commands for people — holds no ``Runtime`` but a runtime id, so ``Daemon``
(blocking) and ``aio.Daemon`` take one on each of these calls. What they send and what they
return is built here, once, so the two faces cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from google.protobuf import json_format

from ._gen import runtime_pb2 as pb


@dataclass(frozen=True)
class Created:
    """What ``Daemon.new_runtime`` answered: the runtime, its root handle, whether it existed
    already (``reattached``), and its latest registry version (number, sha256 digest, when made)."""

    runtime_id: str
    root: str
    reattached: bool = False
    version: int = 0
    version_digest: str = ""
    version_created_at: str = ""


def new_request(definition: Mapping[str, Any], runtime_id: str | None,
                runtime_key: str | None) -> pb.NewRequest:
    """The ``NewRequest`` that ``definition`` — the proto's JSON mapping of one, as a registry file
    holds it (``{"agents": [...], "llm": {...}, "options": {...}}``) — describes; ``runtime_id`` and
    ``runtime_key`` fill the fields it leaves empty. A field the proto does not have is a ValueError
    naming it."""
    try:
        request = json_format.ParseDict(dict(definition), pb.NewRequest())
    except json_format.ParseError as exc:
        raise ValueError(str(exc)) from exc
    if runtime_id:
        request.runtime_id = runtime_id
    if runtime_key and not request.runtime_key:
        request.runtime_key = runtime_key
    return request


def created_from_pb(reply: pb.NewResponse) -> Created:
    v = reply.version
    return Created(runtime_id=reply.runtime_id, root=reply.root, reattached=reply.reattached,
                   version=v.number, version_digest=v.digest, version_created_at=v.created_at)


def shutdown_request(runtime_id: str | None, purge: bool) -> pb.ShutdownRequest:
    """A runtime's shutdown, or (no runtime id) the whole daemon's."""
    if not runtime_id:
        if purge:
            raise ValueError("purge deletes one runtime: name it (a daemon shutdown purges nothing)")
        return pb.ShutdownRequest(daemon=True)
    return pb.ShutdownRequest(runtime_id=runtime_id, purge=purge)
