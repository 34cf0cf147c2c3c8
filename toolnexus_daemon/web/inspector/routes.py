"""The inspector's HTTP endpoints (``--ui-listen``): pages, the live timeline, answering.

Access, checked on every request:

* **Host**: on a loopback listener the ``Host`` header must name the listener itself
  (``127.0.0.1:PORT``, ``localhost:PORT``, ``[::1]:PORT``), so a page of another site that
  rebinds its DNS name to 127.0.0.1 cannot read the inspector;
* **session**: with a token configured, a person logs in once with the daemon's token and gets a
  session cookie (HttpOnly, SameSite=Strict, Secure over TLS); without a token (allowed on
  loopback only) every visitor gets a session without logging in;
* **state changes** (every POST) carry the session's CSRF token in a hidden field and an
  ``Origin`` naming the inspector itself (``http(s)://`` + ``Host``): missing or foreign → 403.

Answers go through ``Runtime.resume`` — the engine verb gRPC ``Resume`` uses, with its single-use
and duplicate rules and the runtime key the session holds; in a cluster an answer for a runtime
another daemon owns is sent to that daemon as a ``Resume`` (``forward``). The live timeline is
server-sent events over the engine's ``watch`` (the verb of gRPC ``Watch``), resumable by seq: each
stored event carries its seq as the SSE ``id``, so a reconnecting browser sends ``Last-Event-ID``.
A runtime owned by another daemon of a cluster is read from the shared store instead, its new
events polled once a second.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from importlib import resources
from typing import ParamSpec, TypeVar
from urllib.parse import parse_qs

from starlette.requests import ClientDisconnect, Request
from starlette.responses import RedirectResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from ...clock import Clock
from ...engine.commit.ownership import Moved
from ...engine.definitions.validate import RUNTIME_ID_RE
from ...engine.verbs.engine import Engine
from ...engine.verbs.event_stream import FellBehind
from ...errors import (
    AlreadyAnswered,
    DaemonError,
    DefinitionChanged,
    FailedPrecondition,
    NotFound,
    PermissionDenied,
    StoreError,
)
from ...model import Answer, Event, EventType
from ...model import Request as AskRequest
from ...store.base import Store
from . import reads, views
from .reads import BadCursor, Visibility
from .schema_form import BadForm, data_of
from .sessions import MAX_KEY_CHARS, MAX_STREAMS, Session, Sessions

log = logging.getLogger("toolnexus_daemon.inspector")
P = ParamSpec("P")
R = TypeVar("R")

COOKIE = "tnx_session"
MAX_BODY_BYTES = 64 * 1024
MAX_REASON_CHARS = 2000
# a live timeline of a runtime another daemon owns polls the shared store this often
POLL_S = 1.0
# one event stream ends after this (the browser reconnects with Last-Event-ID): no stream is for ever
STREAM_MAX_S = 3600.0
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
       "form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
# Referrer-Policy same-origin, not no-referrer: under no-referrer a browser sends "Origin: null" with
# its own form posts, which the Origin check then refuses
HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff",
           "Referrer-Policy": "same-origin", "Cache-Control": "no-store", "X-Frame-Options": "DENY",
           "Cross-Origin-Opener-Policy": "same-origin"}
HTML = "text/html; charset=utf-8"

# in a cluster: (moved, runtime, handle, answer, runtime key) → the owner's (top handle, duplicate),
# or its refusal as a domain error
ForwardResume = Callable[[Moved, str, str, Answer, str], Awaitable[tuple[str, bool]]]


class Refused(Exception):
    """A request the inspector does not serve: its status and a message for the person."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(text)
        self.status, self.text = status, text


class Inspector:
    """The inspector's routes, its sessions and the engine it reads and answers through."""

    def __init__(self, engine: Engine, clock: Clock, token: str, *, secure: bool = False,
                 forward: ForwardResume | None = None) -> None:
        self._engine = engine
        self._token = token
        self._secure = secure
        self._forward = forward
        self.sessions = Sessions(clock.now)
        # Host values a loopback listener answers to (set once bound); None = any (non-loopback)
        self.hosts: set[str] | None = set()
        self._static = {name: _asset(name) for name in ("inspector.js", "inspector.css")}

    def bound(self, address: str, loopback: bool) -> None:
        """Called once the listener is bound: which ``Host`` headers name it."""
        port = address.rpartition(":")[2]
        names = {address.lower(), f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"}
        self.hosts = names if loopback else None

    def routes(self) -> list[BaseRoute]:
        return [Route("/", self._guarded(self._runtimes)),
                Route("/runtime", self._guarded(self._runtime)),
                Route("/events", self._guarded(self._events)),
                Route("/pending", self._guarded(self._pending)),
                Route("/answer", self._guarded(self._answer), methods=["POST"]),
                Route("/keys", self._guarded(self._add_key), methods=["POST"]),
                Route("/logout", self._guarded(self._logout), methods=["POST"]),
                Route("/login", self._login, methods=["GET", "POST"]),
                Route("/static/{name}", self._asset_route)]

    # ------------------------------------------------------------------ access

    def _guarded(self, page: Callable[[Request, Session], Awaitable[Response]]
                 ) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            try:
                self._check_host(request)
                session, sid = self._session(request)
                if session is None:
                    if request.url.path == "/events":
                        raise Refused(401, "log in first")
                    return _secured(RedirectResponse("/login", 303))
                if request.method == "POST":
                    await self._check_post(request, session)
                response = await page(request, session)
            except Refused as exc:
                return _page(exc.status, views.message_page(_title(exc.status), exc.text, None, "error"))
            if sid:  # a session made for this visit (no token configured): the cookie starts it
                self._set_cookie(response, sid)
            return _secured(response)

        return endpoint

    def _check_host(self, request: Request) -> None:
        if self.hosts is not None and request.headers.get("host", "").lower() not in self.hosts:
            raise Refused(421, "this inspector answers only to its own address (the Host header names "
                               "another); open it as http://127.0.0.1:PORT")

    def _session(self, request: Request) -> tuple[Session | None, str]:
        """The request's session, and the id of one created now (no token: loopback visitors)."""
        session = self.sessions.get(request.cookies.get(COOKIE, ""))
        if session is not None or self._token:
            return session, ""
        sid, session = self.sessions.create()
        return session, sid

    async def _check_post(self, request: Request, session: Session) -> None:
        self._check_origin(request)
        form = await _form(request)
        request.state.form = form
        if not session.csrf_ok(form.get("csrf", "")):
            raise Refused(403, "the form's CSRF token is missing or stale: reload the page and try again")

    def _check_origin(self, request: Request) -> None:
        """The ``Origin`` must be this inspector's: the ``Host`` it was reached at, over http or
        https (behind a TLS-terminating proxy the browser says https while the daemon serves http)."""
        origin = request.headers.get("origin", "").lower()
        host = request.headers.get("host", "").lower()
        scheme, _, rest = origin.partition("://")
        same = hmac.compare_digest(rest.encode(), host.encode())
        if not host or scheme not in ("http", "https") or not same:
            raise Refused(403, "the request's Origin is missing or is not this inspector's own")

    def _set_cookie(self, response: Response, sid: str) -> None:
        response.set_cookie(COOKIE, sid, httponly=True, samesite="strict", secure=self._secure, path="/")

    async def _login(self, request: Request) -> Response:
        try:
            self._check_host(request)
            if not self._token:
                return _secured(RedirectResponse("/", 303))
            if request.method == "GET":
                return _page(200, views.login_page())
            self._check_origin(request)
            presented = (await _form(request)).get("token", "")
        except Refused as exc:
            return _page(exc.status, views.message_page(_title(exc.status), exc.text, None, "error"))
        if not hmac.compare_digest(presented.strip().encode(), self._token.encode()):
            log.info("inspector login refused")
            await asyncio.sleep(0.2)  # a guess costs a little time
            return _page(401, views.login_page("That is not the daemon's token."))
        old = request.cookies.get(COOKIE, "")
        if old:
            self.sessions.end(old)
        sid, _ = self.sessions.create()
        response = RedirectResponse("/", 303)
        self._set_cookie(response, sid)
        return _secured(response)

    async def _logout(self, request: Request, session: Session) -> Response:
        self.sessions.end(request.cookies.get(COOKIE, ""))
        response = RedirectResponse("/login" if self._token else "/", 303)
        response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict", secure=self._secure)
        return response

    async def _add_key(self, request: Request, session: Session) -> Response:
        form: dict[str, str] = request.state.form
        key = form.get("key", "").strip()
        if not key or len(key) > MAX_KEY_CHARS:
            raise Refused(400, f"a runtime key is 1 to {MAX_KEY_CHARS} characters")
        session.add_key(key)
        return RedirectResponse(_back(form.get("back", "")), 303)

    # ------------------------------------------------------------------ pages

    async def _runtimes(self, request: Request, session: Session) -> Response:
        cursor = request.query_params.get("page", "")
        store = self._engine.store
        page = await self._read(reads.runtimes, store, Visibility(store, session), cursor)
        return _page(200, views.runtimes_page(page, session))

    async def _pending(self, request: Request, session: Session) -> Response:
        cursor = request.query_params.get("page", "")
        runtime = request.query_params.get("runtime") or None
        seen = Visibility(self._engine.store, session)
        if runtime is not None:
            await self._visible(seen, runtime)
        page = await self._read(reads.pending, self._engine.store, seen, cursor, runtime)
        return _page(200, views.pending_page(page, session, cursor))

    async def _runtime(self, request: Request, session: Session) -> Response:
        rid = request.query_params.get("id", "")
        seen = Visibility(self._engine.store, session)
        await self._visible(seen, rid)
        after = _int(request.query_params.get("after"))
        store = self._engine.store
        handles, cut = await self._read(reads.handles, store, rid)
        events = await self._read(reads.events, store, rid, after, _int(request.query_params.get("before")))
        asks = await self._read(reads.pending, store, seen, "", rid)
        where = "" if self._engine.ownership is None or self._engine.holds(rid) else \
            "Served by another daemon of the cluster: shown from the shared store."
        return _page(200, views.runtime_page(rid, handles, cut, events, asks, session, where))

    async def _visible(self, seen: Visibility, runtime_id: str) -> None:
        """404 unless the session may see ``runtime_id`` (the runtime record is read in a thread:
        on PostgreSQL a read is a round trip, which the loop does not wait on)."""
        if not RUNTIME_ID_RE.match(runtime_id) or not await self._read(seen.sees, runtime_id):
            raise Refused(404, "no such runtime here, or it is protected by a runtime key this session "
                               "does not hold (add the key on the Runtimes page)")

    async def _read(self, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await asyncio.to_thread(fn, *args, **kwargs)
        except BadCursor as exc:
            raise Refused(400, f"{exc}: start again from the first page") from None
        except StoreError as exc:
            raise Refused(503, f"the daemon cannot read its store right now: {exc}") from None

    # ------------------------------------------------------------------ the live timeline

    async def _events(self, request: Request, session: Session) -> Response:
        rid = request.query_params.get("id", "")
        await self._visible(Visibility(self._engine.store, session), rid)
        if session.streams >= MAX_STREAMS:
            raise Refused(429, f"this session has {MAX_STREAMS} live timelines open already; close one")
        resume = request.headers.get("last-event-id") or request.query_params.get("after")
        after = _int(resume) or 0
        return StreamingResponse(self._counted(session, self._stream(rid, session, after)),
                                 media_type="text/event-stream", headers={"X-Accel-Buffering": "no"})

    async def _counted(self, session: Session, stream: AsyncGenerator[bytes, None]) -> AsyncIterator[bytes]:
        """``stream``, counted among the session's open timelines while it runs; closed at once
        when the browser goes (so the engine's subscription ends then, not when collected)."""
        session.streams += 1
        try:
            async for chunk in stream:
                yield chunk
        finally:
            session.streams -= 1
            await stream.aclose()

    async def _stream(self, rid: str, session: Session, after: int) -> AsyncGenerator[bytes, None]:
        yield b"retry: 2000\n\n"
        try:
            rt = await self._engine.open(rid)
            if rt.key_digest:
                self._engine.check_key(rt, session.key_for(rt.key_digest))
            events = rt.watch(after, frozenset(), "")
        except Moved:
            async for chunk in self._poll(rid, after):
                yield chunk
            return
        except DaemonError as exc:  # gone meanwhile, or events after ``after`` no longer kept
            yield _sse("failed", {"error": str(exc)})
            return
        try:
            async with asyncio.timeout(STREAM_MAX_S):
                async for ev in events:
                    yield _sse_event(ev)
        except TimeoutError:
            return  # the browser reconnects from the last id it saw
        except DaemonError as exc:  # fell behind (the browser resumes from its last id) or not retained
            if not isinstance(exc, FellBehind):
                yield _sse("failed", {"error": str(exc)})
            return
        finally:
            await events.aclose()
        yield _sse("end", {})

    async def _poll(self, rid: str, after: int) -> AsyncGenerator[bytes, None]:
        """Events of a runtime another daemon owns, from the shared store (no live text)."""
        loop = asyncio.get_running_loop()
        until = loop.time() + STREAM_MAX_S
        while loop.time() < until:
            page = await asyncio.to_thread(self._engine.store.events, rid, after, 200)
            for ev in page:
                after = ev.seq
                yield _sse_event(ev)
            if not page:
                await asyncio.sleep(POLL_S)

    # ------------------------------------------------------------------ answering

    async def _answer(self, request: Request, session: Session) -> Response:
        form: dict[str, str] = request.state.form
        rid, handle, rid_req = form.get("runtime", ""), form.get("handle", ""), form.get("request", "")
        decision = form.get("decision", "")
        if decision not in ("approve", "decline") or not handle or not rid_req:
            raise Refused(400, "choose Approve or Decline on a request's form")
        seen = Visibility(self._engine.store, session)
        await self._visible(seen, rid)
        asked = await self._read(_asked, self._engine.store, rid, handle, rid_req)
        approve = decision == "approve"
        try:
            data = data_of(asked, form, approve) if isinstance(asked, AskRequest) else None
        except BadForm as exc:
            raise Refused(400, f"the answer was not sent: {exc}") from None
        reason = form.get("reason", "").strip()[:MAX_REASON_CHARS] or None
        answer = Answer(rid_req, approve, data, reason)
        await self._resume(rid, handle, answer, session)
        # ids only, never the data or the reason (as the gRPC access log)
        log.info("inspector answer", extra={"runtime": rid, "handle": handle, "request_id": rid_req,
                                            "ok": approve})
        return RedirectResponse(_back(form.get("back", "")), 303)

    async def _resume(self, rid: str, handle: str, answer: Answer, session: Session) -> None:
        try:
            if self._engine.stopping:
                raise Refused(503, "the daemon is shutting down; answer again in a moment")
            try:
                rt = await self._engine.open(rid)
            except Moved as moved:
                if self._forward is None:
                    raise
                digest = await asyncio.to_thread(Visibility(self._engine.store, session).key_of, rid)
                key = session.key_for(digest or "")
                await self._forward(moved, rid, handle, answer, key)
                return
            if rt.key_digest:
                self._engine.check_key(rt, session.key_for(rt.key_digest))
            await rt.resume(answer, handle, no_wait=True)
        except DefinitionChanged as exc:
            raise Refused(409, f"the agent's definition changed since this was asked, so the answer was "
                               f"not delivered: {exc}") from None
        except AlreadyAnswered:
            raise Refused(409, "this request was already answered differently") from None
        except (NotFound, PermissionDenied) as exc:
            raise Refused(404, str(exc)) from None
        except FailedPrecondition as exc:
            raise Refused(409, str(exc)) from None
        except DaemonError as exc:
            raise Refused(503, str(exc)) from None

    async def _asset_route(self, request: Request) -> Response:
        name = request.path_params["name"]
        asset = self._static.get(name)
        if asset is None:
            return Response(b"", 404)
        kind = "text/javascript" if name.endswith(".js") else "text/css"
        reply = Response(asset, 200, {"Cache-Control": "no-cache"}, media_type=f"{kind}; charset=utf-8")
        return _secured(reply, cache=False)


def _asked(store: Store, rid: str, handle: str, request_id: str) -> AskRequest | None:
    """The request the handle waits on, when it still waits on ``request_id`` (its schema shapes
    the form's data); None otherwise (resume then says what became of it)."""
    rec = store.get_handle(rid, handle)
    pending = rec.get("pending") if rec is not None else None
    if not isinstance(pending, dict) or pending.get("id") != request_id:
        return None
    return AskRequest.from_json(pending)


def _sse_event(ev: Event) -> bytes:
    body = views.event_json(ev)
    if ev.type is EventType.TEXT or not ev.seq:
        return f"event: text\ndata: {body}\n\n".encode()
    return f"id: {ev.seq}\nevent: ev\ndata: {body}\n\n".encode()


def _sse(kind: str, data: dict[str, str]) -> bytes:
    return f"event: {kind}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


async def _form(request: Request) -> dict[str, str]:
    """The POSTed form (urlencoded, at most ``MAX_BODY_BYTES``)."""
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media != "application/x-www-form-urlencoded":
        raise Refused(415, "send the form as application/x-www-form-urlencoded")
    length = request.headers.get("content-length", "")
    if length.isdigit() and int(length) > MAX_BODY_BYTES:
        raise Refused(413, "the form is too large")
    body = bytearray()
    try:
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_BODY_BYTES:
                raise Refused(413, "the form is too large")
    except ClientDisconnect:
        raise Refused(400, "the form did not arrive whole") from None
    try:
        return {k: v[0] for k, v in parse_qs(body.decode("utf-8"), max_num_fields=200).items()}
    except (ValueError, UnicodeDecodeError) as exc:
        raise Refused(400, f"the form does not decode: {exc}") from None


def _back(path: str) -> str:
    """Where a form returns to: a path of this inspector only (never another site)."""
    if path.startswith("/") and not path.startswith("//") and "\\" not in path and len(path) < 2000:
        return path
    return "/"


def _int(text: str | None) -> int | None:
    return int(text) if text is not None and text.isdigit() and len(text) < 19 else None


def _title(status: int) -> str:
    return {400: "Bad request", 401: "Log in first", 403: "Refused", 404: "Not found", 409: "Not answered",
            413: "Too large", 415: "Bad form", 421: "Wrong address", 429: "Too many",
            503: "Try again"}.get(status, "Error")


def _page(status: int, body: bytes) -> Response:
    return _secured(Response(body, status, media_type=HTML))


def _secured(response: Response, cache: bool = True) -> Response:
    for name, value in HEADERS.items():
        if cache or name != "Cache-Control":
            response.headers.setdefault(name, value)
    return response


def _asset(name: str) -> bytes:
    return resources.files(__package__).joinpath("static", name).read_bytes()
