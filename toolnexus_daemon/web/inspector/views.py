"""The inspector's pages: server-rendered HTML from :mod:`.render` templates.

Every value from a model, a tool or a caller goes through :func:`~.render.esc` (the renderer's
default); the one script (``/static/inspector.js``) reads what it needs from ``data-`` attributes
and inserts live text with ``textContent``. Links a request carries are links only when http(s).
"""

from __future__ import annotations

import json
import time
from urllib.parse import urlencode, urlsplit

from ...engine.verbs.inbox import PendingItem, RuntimeSummary
from ...model import JSON, Event, EventType, Request
from .reads import EventPage, Page
from .render import Safe, join, render
from .schema_form import SCHEMA_KEYS, inputs
from .sessions import Session

MAX_SHOWN_CHARS = 4000


def layout(title: str, body: Safe, session: Session | None, *, login: bool = True) -> bytes:
    nav = Safe("")
    if session is not None:
        logout = render('<form method="post" action="/logout" class="inline">$csrf'
                        '<button type="submit" id="logout">Log out</button></form>',
                        csrf=csrf_field(session)) if login else Safe("")
        nav = render('<nav><a href="/">Runtimes</a> <a href="/pending" id="nav-pending">Pending</a> '
                     '$out</nav>', out=logout)
    page = render('<!doctype html><html lang="en"><head><meta charset="utf-8">'
                  '<meta name="viewport" content="width=device-width,initial-scale=1">'
                  '<title>$title · toolnexus inspector</title>'
                  '<link rel="stylesheet" href="/static/inspector.css">'
                  '<script src="/static/inspector.js" defer></script></head>'
                  '<body>$nav<main>$body</main></body></html>', title=title, nav=nav, body=body)
    return page.encode()


def csrf_field(session: Session) -> Safe:
    return render('<input type="hidden" name="csrf" value="$v">', v=session.csrf)


def login_page(error: str = "") -> bytes:
    err = render('<p class="error" id="error">$e</p>', e=error) if error else Safe("")
    body = render('<h1>toolnexus inspector</h1>$err<form method="post" action="/login">'
                  '<label for="token">The daemon\'s token</label> '
                  '<input type="password" id="token" name="token" autocomplete="current-password" required> '
                  '<button type="submit" id="login">Log in</button></form>', err=err)
    return layout("Log in", body, None)


def message_page(title: str, text: str, session: Session | None, status_id: str = "message") -> bytes:
    body = render('<h1>$t</h1><p id="$i">$m</p>'
                  '<p><a href="/">Runtimes</a> · <a href="/pending">Pending</a></p>',
                  t=title, m=text, i=status_id)
    return layout(title, body, session)


def _when(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ts)) + "Z" if ts else ""


def _key_form(session: Session, back: str) -> Safe:
    return render('<details class="keys"><summary>Add a runtime key</summary>'
                  '<form method="post" action="/keys">$csrf<input type="hidden" name="back" value="$back">'
                  '<label for="runtime-key">Runtime key</label> '
                  '<input type="password" id="runtime-key" name="key" required> '
                  '<button type="submit" id="add-key">Add to this session</button></form>'
                  '<p class="muted">Runtimes protected by a key are shown only once their key is added '
                  '($n held).</p></details>', csrf=csrf_field(session), back=back, n=len(session.keys))


def runtimes_page(page: Page[RuntimeSummary], session: Session) -> bytes:
    rows = join(render('<tr><td><a class="runtime" href="$href">$id</a>$lock</td><td>$created</td>'
                       '<td>$states</td><td>$pending</td></tr>',
                       href="/runtime?" + urlencode({"id": r.runtime_id}), id=r.runtime_id,
                       lock=Safe(' <span class="muted">(keyed)</span>') if r.keyed else Safe(""),
                       created=_when(r.created_at),
                       states=", ".join(f"{n} {s}" for s, n in sorted(r.handles.items()) if n) or "none",
                       pending=r.pending or "")
                for r in page.items)
    more = _next("/", page.next_cursor)
    body = render('<h1>Runtimes</h1><table id="runtimes"><thead><tr><th>Runtime</th><th>Created</th>'
                  '<th>Handles</th><th>Pending</th></tr></thead><tbody>$rows</tbody></table>$empty$more$keys',
                  rows=rows, more=more, keys=_key_form(session, "/"),
                  empty=Safe('<p class="muted">No runtimes to show.</p>') if not page.items else Safe(""))
    return layout("Runtimes", body, session)


def _next(path: str, cursor: str, extra: dict[str, str] | None = None) -> Safe:
    if not cursor:
        return Safe("")
    return render('<p><a id="next-page" href="$h">Next page</a></p>',
                  h=f"{path}?{urlencode({**(extra or {}), 'page': cursor})}")


def runtime_page(runtime_id: str, handles: list[JSON], cut: bool, events: EventPage,
                 pending: Page[PendingItem], session: Session, where: str) -> bytes:
    back = "/runtime?" + urlencode({"id": runtime_id})
    tree = join(_handle_row(h) for h in handles)
    cut_note = Safe('<p class="muted">Only the first handles are shown.</p>') if cut else Safe("")
    asks = join(answer_card(e, session, back, i, show_runtime=False) for i, e in enumerate(pending.items))
    more_asks = _next("/pending", pending.next_cursor, {"runtime": runtime_id})
    body = render('<h1>Runtime <span id="runtime-id">$id</span></h1>$where'
                  '<h2>Handles</h2><table id="tree"><thead><tr><th>Handle</th><th>Agent</th><th>State</th>'
                  '<th>Turns</th><th>Tokens</th><th>Waits on</th><th>Last result</th></tr></thead>'
                  '<tbody>$tree</tbody></table>$cut'
                  '<h2>Pending</h2><div id="runtime-pending">$asks</div>$more_asks$none'
                  '<h2>Events</h2>$timeline',
                  id=runtime_id, tree=tree, cut=cut_note, asks=asks, more_asks=more_asks,
                  none=Safe('<p class="muted">Nothing pending.</p>') if not pending.items else Safe(""),
                  timeline=_timeline(runtime_id, events),
                  where=render('<p class="muted">$w</p>', w=where) if where else Safe(""))
    return layout(f"Runtime {runtime_id}", body, session)


def _handle_row(rec: JSON) -> Safe:
    hid = str(rec.get("id") or "")
    pending = rec.get("pending") if isinstance(rec.get("pending"), dict) else None
    waits = ""
    if rec.get("state") == "suspended" and pending:
        req = Request.from_json(pending)
        waits = f"{req.kind or 'request'} {req.id}: {_cut(req.prompt, 200)}"
    last = rec.get("last_result")
    result = ""
    if isinstance(last, dict):
        result = f"{last.get('status')}: {_cut(str(last.get('text') or ''), 200)}"
    usage = rec.get("usage")
    tokens = usage.get("total_tokens") or 0 if isinstance(usage, dict) else 0
    return render('<tr class="handle" data-handle="$id" data-state="$state"><td class="depth-$d">$id</td>'
                  '<td>$agent</td><td class="state">$state</td><td>$turns</td><td>$tokens</td>'
                  '<td class="waits">$waits</td><td class="result">$result</td></tr>',
                  id=hid, d=min(hid.count("/"), 8), agent=rec.get("agent") or "",
                  state=rec.get("state") or "",
                  turns=rec.get("turns_total") or 0, tokens=tokens,
                  waits=waits, result=result)


def _timeline(runtime_id: str, page: EventPage) -> Safe:
    rows = join(_event_row(ev) for ev in page.events)
    shown_to = page.events[-1].seq if page.events else page.after
    links = []
    if page.after > 0:
        links.append(render('<a id="older" href="$h">Older events</a>',
                            h="/runtime?" + urlencode({"id": runtime_id, "before": page.after + 1})))
    newest = shown_to >= page.last_seq
    if not newest:
        links.append(render('<a id="newer" href="$h">Newer events</a> <a href="$n">Newest</a>',
                            h="/runtime?" + urlencode({"id": runtime_id, "after": shown_to}),
                            n="/runtime?" + urlencode({"id": runtime_id})))
    stream = "/events?" + urlencode({"id": runtime_id, "after": shown_to}) if newest else ""
    return render('<p class="paging">$links</p><div id="live-text"></div>'
                  '<table id="timeline" data-stream="$stream"><thead><tr><th>Seq</th><th>At</th>'
                  '<th>Handle</th><th>Type</th><th>What</th></tr></thead>'
                  '<tbody id="events">$rows</tbody></table>'
                  '<p id="stream-state" class="muted">$state</p>',
                  links=join(links, " · "), stream=stream, rows=rows,
                  state="following live" if newest else "")


def _event_row(ev: Event) -> Safe:
    return render('<tr class="ev" data-seq="$seq" data-type="$type"><td>$seq</td><td>$at</td><td>$handle</td>'
                  '<td>$type</td><td class="what">$what</td></tr>',
                  seq=ev.seq, at=ev.at, handle=ev.handle, type=str(ev.type), what=summary(ev))


def summary(ev: Event) -> str:
    """One line of plain text saying what an event was (the page escapes it; the script sets it as
    text)."""
    parts: list[str] = []
    if ev.type is EventType.TRANSITION:
        parts.append(f"{ev.from_state} → {ev.to_state}")
    if ev.pending is not None:
        parts.append(f"{ev.pending.kind or 'request'} {ev.pending.id}: {ev.pending.prompt}")
    if ev.result is not None:
        parts.append(f"{ev.result.status}: {ev.result.text}")
    if ev.note:
        parts.append(ev.note)
    if ev.data and ev.type is not EventType.TEXT:
        parts.append(json.dumps(ev.data, ensure_ascii=False, sort_keys=True))
    return _cut(" · ".join(parts), MAX_SHOWN_CHARS)


def event_json(ev: Event) -> str:
    """An event as the live timeline's script takes it (JSON: it is parsed, never evaluated)."""
    if ev.type is EventType.TEXT:
        delta = str((ev.data or {}).get("delta", ""))
        return json.dumps({"type": "text", "handle": ev.handle, "text": delta}, ensure_ascii=False)
    return json.dumps({"seq": ev.seq, "at": ev.at, "handle": ev.handle, "type": str(ev.type),
                       "what": summary(ev)}, ensure_ascii=False)


def pending_page(page: Page[PendingItem], session: Session, cursor: str) -> bytes:
    back = "/pending" + ("?" + urlencode({"page": cursor}) if cursor else "")
    cards = join(answer_card(e, session, back, i) for i, e in enumerate(page.items))
    body = render('<h1>Pending</h1><p class="muted">Every open request across the runtimes this session '
                  'may see, oldest first.</p><div id="pending">$cards</div>$empty$more$keys',
                  cards=cards, more=_next("/pending", page.next_cursor),
                  empty=Safe('<p class="muted">Nothing is pending.</p>') if not page.items else Safe(""),
                  keys=_key_form(session, back))
    return layout("Pending", body, session)


def answer_card(e: PendingItem, session: Session, back: str, index: int, *,
                show_runtime: bool = True) -> Safe:
    req = e.request
    form_id = f"a{index}"
    data = {k: v for k, v in (req.data or {}).items() if k not in SCHEMA_KEYS and k != "path"}
    shown = render('<pre class="data">$d</pre>', d=_cut(json.dumps(data, indent=2, ensure_ascii=False),
                                                        MAX_SHOWN_CHARS)) if data else Safe("")
    where = Safe("")
    if show_runtime:
        where = render('<p class="muted">Runtime <a href="$h">$rid</a></p>',
                       h="/runtime?" + urlencode({"id": e.runtime_id}), rid=e.runtime_id)
    expires = render('<span> · expires $x</span>', x=req.expires_at) if req.expires_at else Safe("")
    return render(
        '<section class="ask" data-request="$rid_req" data-handle="$handle">'
        '<h3><span class="kind">$kind</span> <span class="muted">$req_id</span></h3>$where'
        '<p class="prompt">$prompt</p>$url$shown'
        '<p class="muted">$handle ($agent) · waiting since $since$expires</p>'
        '<form method="post" action="/answer" id="$fid">$csrf'
        '<input type="hidden" name="runtime" value="$runtime">'
        '<input type="hidden" name="handle" value="$handle">'
        '<input type="hidden" name="request" value="$req_id"><input type="hidden" name="back" value="$back">'
        '$inputs<label for="$fid-reason">Reason (optional)</label>'
        '<textarea id="$fid-reason" name="reason" rows="2" maxlength="2000"></textarea>'
        '<button type="submit" name="decision" value="approve" class="approve">Approve</button>'
        '<button type="submit" name="decision" value="decline" class="decline" formnovalidate>'
        'Decline</button>'
        '</form></section>',
        rid_req=req.id, handle=e.handle, kind=req.kind or "request", req_id=req.id, where=where,
        prompt=req.prompt, url=_link(req.url) if req.url else Safe(""), shown=shown, agent=e.agent,
        since=_when(e.since), expires=expires, fid=form_id, csrf=csrf_field(session), runtime=e.runtime_id,
        back=back, inputs=inputs(req, form_id))


def _link(url: str) -> Safe:
    if urlsplit(url).scheme.lower() not in ("http", "https"):
        return render('<p class="url">$u</p>', u=url)
    return render('<p class="url"><a href="$u" rel="noreferrer noopener" target="_blank">$u</a></p>', u=url)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "…"
