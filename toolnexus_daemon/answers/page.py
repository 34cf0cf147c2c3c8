"""The answer page: plain HTML with one form, no script, readable on a phone.

Everything shown comes from a model or a tool, so every value is escaped, and the page is sent
with a Content-Security-Policy that allows no script, no outside resource and form posts only
back to itself. The form posts to the page's own address (an empty ``action``), so it works
behind any base URL.
"""

from __future__ import annotations

import html
import json
from urllib.parse import urlsplit

from ..model import Request

_STYLE = ("body{font-family:system-ui,sans-serif;max-width:40rem;margin:1.5rem auto;padding:0 1rem;"
          "line-height:1.4}pre{background:#f4f4f4;padding:.6rem;overflow:auto;white-space:pre-wrap}"
          "textarea{width:100%;min-height:4rem;box-sizing:border-box}"
          "button{font-size:1.1rem;padding:.6rem 1.4rem;margin:.4rem .6rem .4rem 0}"
          ".muted{color:#666;font-size:.9rem}")


def _doc(title: str, body: str) -> bytes:
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width,initial-scale=1">'
            f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head>"
            f"<body>{body}</body></html>").encode()


def question(request: Request) -> bytes:
    """The request and the Approve / Decline form."""
    data = {k: v for k, v in (request.data or {}).items() if k != "path"}
    pretty = json.dumps(data, indent=2, ensure_ascii=False)
    shown = f'<pre id="data">{html.escape(pretty)}</pre>' if data else ""
    link = _link(request.url) if request.url else ""
    expires = f'<p class="muted">Expires {html.escape(request.expires_at)}</p>' if request.expires_at else ""
    body = (f'<h1>{html.escape(request.kind or "Request")}</h1>'
            f'<p id="prompt">{html.escape(request.prompt)}</p>{link}{shown}{expires}'
            '<form method="post" action="">'
            '<label for="reason">Reason (optional)</label><br>'
            '<textarea id="reason" name="reason" maxlength="2000"></textarea><br>'
            '<button id="approve" type="submit" name="decision" value="approve">Approve</button>'
            '<button id="decline" type="submit" name="decision" value="decline">Decline</button>'
            "</form>"
            f'<p class="muted">Request {html.escape(request.id)}</p>')
    return _doc(request.prompt[:60] or "Answer", body)


def _link(url: str) -> str:
    """The request's ``url``: a link only when it is http(s) (never ``javascript:`` and the like)."""
    if urlsplit(url).scheme.lower() not in ("http", "https"):
        return f'<p id="url">{html.escape(url)}</p>'
    return (f'<p id="url"><a href="{html.escape(url, quote=True)}" rel="noreferrer noopener">'
            f"{html.escape(url)}</a></p>")


def message(title: str, text: str, *, state: str) -> bytes:
    """A page that only says something: the outcome, or why the link does not open."""
    head = f'<h1 id="state" data-state="{html.escape(state, quote=True)}">{html.escape(title)}</h1>'
    return _doc(title, f'{head}<p id="message">{html.escape(text)}</p>')
