"""The answer-link endpoints (docs/protocol.md §10), from HTTP request to HTTP response.

``GET /a/<token>`` shows the request: JSON, or the HTML page when the client asks for
``text/html`` (a browser). ``POST /a/<token>`` answers it, with JSON ``{ok, data?, reason?}`` or
the page's form. ``GET /a/<token>?code=…&state=…`` (or ``?error=…``) answers a request of kind
``authorization`` with the query as its data: an OAuth provider's redirect lands here.

Statuses: 200 shown or answered (``state: duplicate`` for the same answer again), 400 bad body,
404 no such link, 405 other methods, 409 a different answer than the one given (``state:
conflict``) or an answer the agent can no longer take as it is because its definition changed
since it asked (``state: definition_changed``, the message naming the change), 410 a link that
was used up (answered, cancelled, expired, its runtime deleted), 413 body too large, 415 a body
that is neither JSON nor a form, 503 when the store cannot be read or (cluster) the runtime's
owner cannot be reached.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlsplit

from ..bounds import PeerDataError, PeerLimits, check_json
from ..errors import StoreError
from ..model import JSON, Answer
from . import page
from .links import Link, Links, LinkState, Outcome

MAX_REASON_CHARS = 2000
AUTHORIZATION = "authorization"
_COMMON = {"Cache-Control": "no-store", "Referrer-Policy": "no-referrer", "X-Content-Type-Options": "nosniff"}
_CSP = "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'"
_HTML = "text/html; charset=utf-8"
_TITLES = {"definition_changed": "The agent changed since this was asked"}


@dataclass(frozen=True)
class HttpRequest:
    method: str
    target: str  # path and query, as sent
    headers: Mapping[str, str]  # lower-case names; a repeated header keeps its last value
    body: bytes = b""


@dataclass(frozen=True)
class HttpResponse:
    status: int
    body: bytes = b""
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)


class BadBody(ValueError):
    """The answer's body does not say an answer (400), or is of a type not taken (415)."""

    def __init__(self, text: str, status: int = 400) -> None:
        super().__init__(text)
        self.status = status


class Routes:
    def __init__(self, links: Links, limits: PeerLimits) -> None:
        self._links = links
        self._limits = limits

    async def __call__(self, req: HttpRequest) -> HttpResponse:
        html = _wants_html(req)
        parts = urlsplit(req.target)
        segments = parts.path.split("/")
        if len(segments) < 3 or segments[-2] != "a" or not segments[-1]:
            return _reply(404, {"error": "no such page; answer links look like /a/<token>"}, html)
        if req.method not in ("GET", "HEAD", "POST"):
            return _reply(405, {"error": f"{req.method} is not served here; use GET or POST"}, html,
                          {"Allow": "GET, HEAD, POST"})
        try:
            link = await self._links.lookup(segments[-1])
        except StoreError as exc:  # the database is down, or a record does not decode: try later
            return _reply(503, {"error": f"the daemon cannot read its store right now: {exc}"}, html,
                          {"Retry-After": "5"})
        if link is None:
            return _reply(404, {"error": "no such link (check that it was copied whole)"}, html)
        if req.method == "POST":
            return await self._post(req, link)
        query = {k: v[0] for k, v in parse_qs(parts.query, max_num_fields=50).items()}
        # only a GET answers (a HEAD, or a chat app's preview of a plain link, changes nothing)
        redirect = "code" in query or "error" in query
        if req.method == "GET" and link.request.kind == AUTHORIZATION and redirect:
            return await self._redirect(link, query, html)
        return _show(link, html)

    async def _post(self, req: HttpRequest, link: Link) -> HttpResponse:
        form = _media(req) == "application/x-www-form-urlencoded"
        html = form or _wants_html(req)
        try:
            answer = _form_answer(link, req.body) if form else self._json_answer(link, req)
        except BadBody as exc:
            return _reply(exc.status, {"error": str(exc)}, html)
        return _outcome(await self._links.answer(link, answer), html)

    async def _redirect(self, link: Link, query: dict[str, str], html: bool) -> HttpResponse:
        ok = "error" not in query
        answer = Answer(link.row.request, ok, dict(query), None if ok else query["error"][:MAX_REASON_CHARS])
        return _outcome(await self._links.answer(link, answer), html, signed_in=ok)

    def _json_answer(self, link: Link, req: HttpRequest) -> Answer:
        if _media(req) not in ("application/json", ""):
            raise BadBody("send the answer as application/json {ok, data?, reason?} or as a form", 415)
        try:
            body = json.loads(req.body)
        except (ValueError, UnicodeDecodeError) as exc:
            raise BadBody(f"the body is not JSON: {exc}") from exc
        if not isinstance(body, dict) or not isinstance(body.get("ok"), bool):
            raise BadBody('want a JSON object with "ok": true or false (and "data", "reason" if needed)')
        data, reason = body.get("data"), body.get("reason")
        if data is not None and not isinstance(data, dict):
            raise BadBody('"data" must be a JSON object')
        if reason is not None and (not isinstance(reason, str) or len(reason) > MAX_REASON_CHARS):
            raise BadBody(f'"reason" must be text of at most {MAX_REASON_CHARS} characters')
        try:
            check_json(data, "data", self._limits.request_data_bytes, self._limits)
        except PeerDataError as exc:
            raise BadBody(str(exc)) from exc
        return Answer(link.row.request, body["ok"], data or None, reason or None)


def _form_answer(link: Link, body: bytes) -> Answer:
    try:
        fields = {k: v[0] for k, v in parse_qs(body.decode("utf-8"), max_num_fields=10).items()}
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadBody(f"the form does not decode: {exc}") from exc
    decision = fields.get("decision")
    if decision not in ("approve", "decline"):
        raise BadBody("choose Approve or Decline")
    reason = fields.get("reason", "").strip()[:MAX_REASON_CHARS]
    return Answer(link.row.request, decision == "approve", None, reason or None)


def _show(link: Link, html: bool) -> HttpResponse:
    if not link.state.open:
        response = _outcome(Outcome(410, str(link.state), _used(link)), html)
        if html or link.answer is None:
            return response
        said = {k: v for k, v in link.answer.to_json().items() if k != "id"}
        body = {**json.loads(response.body), "answer": said}
        return _reply(410, body, False)
    if html:
        return HttpResponse(200, page.question(link.request), _HTML,
                            {**_COMMON, "Content-Security-Policy": _CSP})
    return _reply(200, {"state": str(link.state), "request": link.request.to_json()}, False)


def _used(link: Link) -> str:
    if link.state is LinkState.ANSWERED:
        said = "approved" if link.answer is not None and link.answer.ok else "declined"
        return f"this request was already answered ({said}); the link is used up"
    return {LinkState.CANCELLED: "the request was cancelled; the link can no longer be used",
            LinkState.EXPIRED: "the request expired before it was answered",
            LinkState.GONE: "the runtime of this request no longer exists"}.get(link.state, "used up")


def _outcome(out: Outcome, html: bool, *, signed_in: bool = False) -> HttpResponse:
    body: JSON = {"state": out.state, "message": out.message}
    if out.handle:
        body["handle"] = out.handle
    if not html:
        return _reply(out.status, body, False)
    done = out.status == 200
    refused = _TITLES.get(out.state, "This link cannot be used")
    title = ("Signed in" if signed_in else "Answered") if done else refused
    text = f"{out.message}. You can close this page." if done else out.message
    return HttpResponse(out.status, page.message(title, text, state=out.state), _HTML,
                        {**_COMMON, "Content-Security-Policy": _CSP})


def _reply(status: int, body: JSON, html: bool, extra: dict[str, str] | None = None) -> HttpResponse:
    headers = {**_COMMON, **(extra or {})}
    if html:
        text = str(body.get("error") or body.get("message") or "")
        return HttpResponse(status, page.message(f"Error {status}", text, state=str(status)), _HTML,
                            {**headers, "Content-Security-Policy": _CSP})
    return HttpResponse(status, json.dumps(body, ensure_ascii=False).encode(), "application/json", headers)


def _media(req: HttpRequest) -> str:
    return req.headers.get("content-type", "").split(";")[0].strip().lower()


def _wants_html(req: HttpRequest) -> bool:
    accept = req.headers.get("accept", "").lower()
    return "text/html" in accept and "application/json" not in accept
