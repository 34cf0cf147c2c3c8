"""``answer REQUEST_ID --approve|--decline``: answer an open request without knowing where it waits.

Without ``--runtime`` the runtime is found through ``ListPending`` (the
request id open in exactly one place); open in several runtimes or handles,
the command refuses with exit 7 and names them, rather than guess. ``--data``
is parsed before anything is sent: bad JSON is a usage error naming the
problem.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from google.protobuf import struct_pb2

from ..api._gen import runtime_pb2 as pb
from . import render
from .connect import Connection
from .exitcodes import CliError, Exit
from .listing import all_pending


def parse_data(text: str | None) -> struct_pb2.Struct | None:
    """``--data`` as a Struct; not JSON, or JSON that is not an object, is a usage error."""
    if text is None:
        return None
    try:
        value: Any = json.loads(text)
    except ValueError as exc:
        raise CliError(Exit.USAGE, f"--data is not valid JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise CliError(Exit.USAGE, f"--data must be a JSON object ({{...}}), got {type(value).__name__}")
    out = struct_pb2.Struct()
    out.update(value)
    return out


def answer(conn: Connection, ns: argparse.Namespace) -> int:
    data = parse_data(ns.data)
    runtime, handle = (ns.runtime, ns.handle or "") if ns.runtime else locate(conn, ns.request_id, ns.handle)
    reason = ns.reason or ("" if ns.approve else "declined")
    reply_answer = pb.Answer(id=ns.request_id, ok=bool(ns.approve), reason=reason)
    if data is not None:
        reply_answer.data.CopyFrom(data)
    request = pb.ResumeRequest(runtime_id=runtime, answer=reply_answer, handle=handle, no_wait=ns.no_wait)
    try:
        reply = conn.call(conn.stub.Resume, request)
    except CliError as err:
        if err.message.startswith("DEADLINE_EXCEEDED"):  # Resume waits for the agent to settle
            raise CliError(err.code, f"{err.message}; the answer may have been accepted while the agent "
                                     "was still working: see `inspect`, or answer with --no-wait") from err
        raise
    if ns.json:
        print(render.dumps({"runtime_id": runtime, **render.to_json(reply)}), end="")
        return Exit.OK
    verb = "approved" if ns.approve else "declined"
    print(f"{verb} {ns.request_id} in runtime {runtime}" + (" (already answered so; nothing changed)"
                                                           if reply.duplicate else ""))
    if reply.HasField("result") and reply.handle:
        r = reply.result
        print(f"{reply.handle}: {r.status}" + (f" \"{render.clip(r.text)}\"" if r.text else ""))
    return Exit.OK


def locate(conn: Connection, request_id: str, handle: str | None) -> tuple[str, str]:
    """The (runtime, handle) where ``request_id`` is open, from ListPending; none or several → CliError."""
    places = {(i.runtime_id, i.handle) for i in all_pending(conn) if i.request.id == request_id}
    if handle:
        places = {p for p in places if p[1] == handle}
    if not places:
        raise CliError(Exit.NOT_FOUND, f"no open request {request_id!r} in any runtime this caller may see "
                                       "(answered already? keyed runtime: pass --runtime-key)")
    runtimes = sorted({rt for rt, _ in places})
    if len(runtimes) > 1:
        raise CliError(Exit.AMBIGUOUS, f"request {request_id!r} is open in {len(runtimes)} runtimes "
                                       f"({', '.join(runtimes)}): name one with --runtime")
    if len(places) > 1:
        handles = sorted(h for _, h in places)
        raise CliError(Exit.AMBIGUOUS, f"request {request_id!r} is open on {len(handles)} handles of runtime "
                                       f"{runtimes[0]} ({', '.join(handles)}): name one with --handle")
    return next(iter(places))
